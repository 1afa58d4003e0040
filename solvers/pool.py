"""Client side of the solver workers: a small per-process pool, thread-safe, fork-aware.

Each worker is a long-lived `solvers/_worker.py` process (inside bubblewrap at level "bwrap")
that has the Fast Downward translator imported and serves one call at a time. A thread takes
an idle worker, or starts one while the pool is below its size, or waits. Workers are started
from one dedicated thread: bubblewrap's --die-with-parent (PR_SET_PDEATHSIG) is tied to the
thread that forked, so a worker started from a short-lived thread would die with that thread.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import queue
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from solvers import locate
from solvers.errors import InfraError
from solvers.limits import Limits
from solvers.planners import planners
from solvers.sandbox import (
    LEVELS,
    SANDBOX_WORK_ROOT,
    RunResult,
    bwrap_argv,
    call_uid,
    note_bwrap_works,
    python_runtime,
    sandbox_level,
    scrubbed_env,
)

WORKER_SCRIPT = Path(__file__).with_name("_worker.py")
CHECK_MODULE = Path(__file__).with_name("pddl_check.py")  # loaded by the worker by its path
START_TIMEOUT_S = 60.0
# How long past the call's own limit the client waits for the worker's answer before it
# declares the worker broken and kills it (the worker kills the call at the limit itself).
ANSWER_GRACE_S = 15.0


class WorkerError(InfraError, RuntimeError):
    """The solver worker could not take or answer a call."""

    kind = "solver_worker"


class WorkerGone(WorkerError):
    """The worker was dead before it took the request: the call never ran, so it may be retried."""


class WorkerTimeout(WorkerError):
    """The worker gave no answer before the call's deadline (it is then killed)."""


# The machines solvers/_worker.py has a seccomp filter for (its NATIVE_ABIS; a test keeps the two
# equal): importing the worker script here would cost every one-shot `halo solve` its ctypes import.
FILTER_MACHINES = ("x86_64", "aarch64")


def shares_session() -> bool:
    """Whether workers stay in this process's session (one scheduling group with it, see
    solvers/_worker.py _autogroup_takes_nice): where their seccomp filter can refuse terminal
    input (Linux on a machine the filter knows; HALO_SOLVER_OWN_SESSION=1 opts out)."""
    if os.environ.get("HALO_SOLVER_OWN_SESSION", "") == "1":
        return False
    return sys.platform == "linux" and os.uname().machine in FILTER_MACHINES


def _ro_paths() -> list[str]:
    _, runtime_dirs = python_runtime()
    paths = list(runtime_dirs) + [str(WORKER_SCRIPT.resolve()), str(CHECK_MODULE.resolve())]
    for planner in planners():
        for found in planner.ro_paths():
            if not str(found).startswith("/usr/"):
                # Only the folders are resolved: a symlink a loader passes through (Debian's
                # /etc/alternatives) is bound at its own path (bwrap binds what it points to).
                found = Path(found)
                paths.append(os.path.join(os.path.realpath(found.parent), found.name))
    return list(dict.fromkeys(paths))


class Worker:
    def __init__(self, level: str):
        self.level = level
        exe, _ = python_runtime()
        fd_bin = locate.fd_bin()
        self._own_root: str | None = None
        shared = shares_session()
        if level == "bwrap":
            root, prefix = SANDBOX_WORK_ROOT, bwrap_argv(_ro_paths(), new_session=not shared)
        else:
            self._own_root = root = tempfile.mkdtemp(prefix="halo-worker-")
            prefix = []
        config = {"root": root, "fd_bin": str(fd_bin) if fd_bin else None, "wipe_root": level == "bwrap",
                  # Outside bwrap the worker's parent is this process (inside, it is bwrap's init).
                  "parent_pid": None if level == "bwrap" else os.getpid(),
                  # A root worker hands each call to this unprivileged uid (RLIMIT_NPROC).
                  "call_uid": call_uid(),
                  # What calls must still reach as that uid (else they keep root, and it is said).
                  "reach": _ro_paths(),
                  # A one-shot process makes one call: warming the translator would cost, not save.
                  "warm_up": os.environ.get("HALO_SOLVER_WARM_UP", "1") != "0",
                  # In this process's session, behind the worker's seccomp filter (solvers/_worker.py);
                  # level "none" (the benchmarks' baseline) confines nothing, the filter included.
                  "shared_session": shared, "terminal_filter": shared and level != "none"}
        # -s -S -P: no user site, no site-packages, no script dir on sys.path. Not -I, which would
        # also ignore PYTHONHASHSEED: a fixed seed makes the translator's output (and so the
        # plans) the same in every worker, run after run.
        argv = prefix + [exe, "-s", "-S", "-P", str(WORKER_SCRIPT.resolve()), json.dumps(config)]
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the worker)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     start_new_session=not shared, process_group=0 if shared else None,
                                     env=dict(scrubbed_env(), PYTHONHASHSEED="0"), cwd="/", close_fds=True)
        self.calls = 0
        try:
            hello = self._read(time.monotonic() + START_TIMEOUT_S)
        except WorkerError as exc:
            tail = self.stderr_tail()  # before kill(), which closes the file
            self.kill()
            raise WorkerError(f"solver worker failed to start ({level}): {exc}; {tail}") from None
        self.pid = hello.get("pid")
        self.call_uid: int | None = hello.get("call_uid")
        self.drop_error: str = hello.get("drop_error") or ""
        if self.drop_error:
            _warn_once(f"solver calls at level {level} run as root, so their process-count limit is "
                       f"not enforced: {hello['drop_error']}")
        if level == "bwrap":
            note_bwrap_works()

    def stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-2000:].decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def _read_exact(self, n: int, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        chunks = []
        while n:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise WorkerTimeout("no answer in time")
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                continue
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise WorkerError(f"worker exited (code {self.proc.poll()})")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _read(self, deadline: float) -> dict:
        size = struct.unpack(">Q", self._read_exact(8, deadline))[0]
        return json.loads(self._read_exact(size, deadline))

    def call(self, request: dict, answer_deadline: float, blobs: tuple[bytes, ...] = ()) -> dict:
        # A worker that died while idle shows as a finished process or an end of file on its
        # output (an idle worker writes nothing): the call never ran, so it may be retried. This
        # costs a poll; an acknowledgement from the worker per call would cost a round trip of
        # context switches per call (docs/results/2026-12-03-code-figures.md).
        if self.proc.poll() is not None or select.select([self.proc.stdout.fileno()], [], [], 0)[0]:
            raise WorkerGone(f"worker gone while idle (code {self.proc.poll()})")
        body = json.dumps(request).encode()
        try:
            self.proc.stdin.write(struct.pack(">Q", len(body)) + body)
            for blob in blobs:  # the files, raw, after the request that gives their sizes
                self.proc.stdin.write(blob)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise WorkerGone(f"worker gone: {exc}") from None
        self.calls += 1
        return self._read(answer_deadline)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            with contextlib.suppress(OSError, AttributeError):
                stream.close()
        if self._own_root:
            import shutil

            shutil.rmtree(self._own_root, ignore_errors=True)

    def close(self) -> None:
        """Polite stop: EOF on its input ends the worker's loop."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
        self.kill()


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        import logging  # only here: a one-shot `halo solve` does not pay for the import

        logging.getLogger("halo.solvers").warning(message)


class _Spawner:
    """One long-lived thread that starts every worker (see the module docstring for why). A
    plain thread and a queue: concurrent.futures would put its imports (it pulls in logging) on a
    one-shot `halo solve`'s critical path."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[str, list[Worker | BaseException], threading.Event]] = queue.SimpleQueue()
        threading.Thread(target=self._loop, daemon=True, name="halo-solver-spawn").start()

    def _loop(self) -> None:
        while True:
            level, out, done = self._jobs.get()
            try:
                out.append(Worker(level))
            except BaseException as exc:  # handed to the caller, who raises it
                out.append(exc)
            done.set()

    def start(self, level: str) -> Worker:
        out: list[Worker | BaseException] = []
        done = threading.Event()
        self._jobs.put((level, out, done))
        done.wait()
        if isinstance(out[0], BaseException):
            raise out[0]
        return out[0]


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _spawn(level: str) -> Worker:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
        spawner = _spawner
    return spawner.start(level)


def default_size() -> int:
    env = os.environ.get("HALO_SOLVER_WORKERS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(2, min(8, os.cpu_count() or 2))


class WorkerPool:
    def __init__(self, level: str, size: int | None = None):
        self.level = level
        self.size = size or default_size()
        self._idle: list[Worker] = []
        self._all: set[Worker] = set()
        self._starting = 0
        self._cond = threading.Condition()
        self._closed = False

    def _acquire(self) -> Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise WorkerError("pool closed")
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive():
                        return worker
                    self._all.discard(worker)
                    worker.kill()
                if len(self._all) + self._starting < self.size:
                    self._starting += 1
                    break
                self._cond.wait()
        try:
            worker = _spawn(self.level)
        except BaseException:
            with self._cond:
                self._starting -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._starting -= 1
            self._all.add(worker)
        return worker

    def _release(self, worker: Worker, broken: bool) -> None:
        with self._cond:
            if broken or self._closed:
                self._all.discard(worker)
            else:
                self._idle.append(worker)
            self._cond.notify()
        if broken or self._closed:
            worker.kill()

    def warm(self, n: int | None = None) -> None:
        """Start workers ahead of the first calls (benchmarks, servers)."""
        workers = [self._acquire() for _ in range(min(n or self.size, self.size))]
        for worker in workers:
            self._release(worker, broken=False)

    def request(self, request: dict, *, files: dict[str, str | bytes], limits: Limits,
                collect: tuple[str, ...] = (), deadline: float | None = None,
                check: tuple[str, ...] | None = None) -> RunResult:
        """Run one request. `deadline` (time.monotonic()) bounds the whole call, the staging of
        the files included; without it the call gets limits.timeout_s from when it is sent.
        `check`: the domain and problem (and plan) file names, to run the strict check on before the program
        (a failed check answers without running it)."""
        raw = {name: data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")
               for name, data in files.items()}
        payload = self._payload(request, raw, limits, collect, check)
        for attempt in range(2):
            try:
                worker = self._acquire()
            except WorkerError as exc:
                return RunResult(None, level=self.level, error=str(exc))
            sent_at = time.monotonic()
            remaining = limits.timeout_s if deadline is None else deadline - sent_at
            if remaining <= 0:
                self._release(worker, broken=False)
                return RunResult(None, level=self.level, timed_out=True,
                                 error="wall-clock limit hit before the call started")
            payload["timeout_s"] = remaining
            # The worker's clock for the call starts here, not when the request's first byte
            # arrives: encoding and sending a huge request count against the limit too.
            payload["sent_at"] = sent_at
            try:
                answer = worker.call(payload, sent_at + remaining + ANSWER_GRACE_S, tuple(raw.values()))
            except WorkerError as exc:
                self._release(worker, broken=True)
                # A worker that died while idle is replaced once; a call that broke its worker,
                # or hung it, is reported, not repeated.
                if attempt == 0 and isinstance(exc, WorkerGone):
                    continue
                return RunResult(None, level=self.level, error=f"solver worker failed: {exc}",
                                 wall_s=time.monotonic() - sent_at,
                                 timed_out=isinstance(exc, WorkerTimeout))
            except BaseException:
                self._release(worker, broken=True)
                raise
            self._release(worker, broken=False)
            return self._result(answer)
        return RunResult(None, level=self.level, error="solver worker failed twice")

    def _payload(self, request: dict, raw: dict[str, bytes], limits: Limits, collect: tuple[str, ...],
                 check: tuple[str, ...] | None) -> dict:
        """The request as the worker reads it (the files' contents follow it raw)."""
        payload = dict(request)
        payload.update(
            # Sizes here, contents raw after the request: a 50 MB problem is neither base64- nor
            # JSON-encoded (that took seconds of a call's limit).
            file_sizes=[[name, len(data)] for name, data in raw.items()],
            timeout_s=limits.timeout_s,
            output_bytes=limits.output_bytes,
            collect=list(collect),
            check=list(check) if check else None,
            collect_bytes=limits.file_mb * 1024 * 1024,
            env=scrubbed_env(),
            confine=self.level != "none",
            limits={"cpu_s": limits.timeout_s, "memory_bytes": limits.memory_mb * 1024 * 1024,
                    "file_bytes": limits.file_mb * 1024 * 1024, "nofile": 256, "nproc": 512},
        )
        return payload

    def _result(self, answer: dict) -> RunResult:
        """The worker's answer to a call that reached it."""
        if not answer.get("ok"):
            return RunResult(None, level=self.level, error=answer.get("error", "worker error"))
        if "returncode" not in answer:  # the strict check failed: nothing ran
            return RunResult(None, level=self.level, cpu_s=answer.get("host_cpu_s", 0.0),
                             static_check=answer.get("check") or {}, error="the strict check failed")
        return RunResult(
            returncode=answer["returncode"],
            output=answer["output"],
            timed_out=answer["timed_out"],
            wall_s=answer["wall_s"],
            cpu_s=answer["cpu_s"] + answer.get("host_cpu_s", 0.0),
            maxrss_kb=answer["maxrss_kb"],
            files={k: base64.b64decode(v) for k, v in answer["files"].items()},
            level=self.level,
            leftover_processes=answer["leftover_processes"],
            translated=answer["translated"],
            static_check=answer.get("check") or {},
        )

    call = request

    def close(self) -> None:
        with self._cond:
            self._closed = True
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            self._cond.notify_all()
        for worker in workers:
            worker.close()

    def worker_pids(self) -> list[int]:
        with self._cond:
            return [w.proc.pid for w in self._all]


_pools: dict[str, WorkerPool] = {}
_pools_lock = threading.Lock()


def get_pool(level: str | None = None) -> WorkerPool:
    level = level or sandbox_level()
    if level not in LEVELS:
        raise ValueError(f"sandbox level must be one of {LEVELS}, got {level!r}")
    with _pools_lock:
        pool = _pools.get(level)
        if pool is None or pool._closed:
            pool = _pools[level] = WorkerPool(level)
        return pool


def shutdown() -> None:
    """Stop every worker of this process (also runs at exit)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


def _after_fork_in_child() -> None:
    # The parent's workers belong to the parent: forget them without touching them.
    global _pools_lock, _spawner, _spawner_lock
    _pools.clear()
    _pools_lock = threading.Lock()
    _spawner = None
    _spawner_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(shutdown)


def run(argv: list[str], *, files: dict[str, str | bytes] | None = None, limits: Limits = Limits(),
        collect: tuple[str, ...] = (), level: str | None = None) -> RunResult:
    """Run `argv` in its own directory under the sandbox level in force (or `level`).

    argv[0] must be an absolute path to a program visible in the sandbox (under /usr, the
    Python runtime, or the planner files). Never raises for what the command does; a failure
    of the machinery itself comes back as returncode None with `error` set.
    """
    if not isinstance(argv, list | tuple) or not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError("argv must be a non-empty list of strings (no shell strings)")
    request = {"kind": "exec", "argv": list(argv)}
    return get_pool(level).call(request, files=files or {}, limits=limits, collect=collect)

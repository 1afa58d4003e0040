"""The solver worker: a long-lived process that runs one confined child per request.

Started by solvers/pool.py, usually inside one long-lived bubblewrap sandbox. It is a plain
script (stdlib only, started with `python -I -S`) so that the sandbox needs to expose nothing of
the project but this file and the planner files.

At start it imports the Fast Downward translator once. Per request it makes a fresh directory,
writes the request's files there, and forks a child which starts its own process group (not a
session: see _autogroup_takes_nice), applies the rlimits, and then either runs the translator
in-process and execs the `downward` search binary ("fd" requests) or execs a given argv ("exec"
requests). The worker pumps the child's output
(keeping only its head and tail), kills the child's process group at the wall-clock deadline,
and, being a child subreaper, kills and reaps every process the call left behind, including
ones that started their own session. Then it deletes the call's files and answers.

Protocol on fds 0/1: 8-byte big-endian length + UTF-8 JSON, one request, one answer.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import errno
import gc
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

# Exit codes of the forked child that are not the planner's own (FD uses 0-37).
EXIT_CHILD_SETUP = 120
EXIT_EXEC_FAILED = 127

TRANSLATE_OUT_OF_MEMORY = 20
TRANSLATE_OUT_OF_TIME = 21
TRANSLATE_CRITICAL_ERROR = 30
TRANSLATE_INPUT_ERROR = 31

HEAD_BYTES = 16_384

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> None:
    _libc.prctl(option, arg, 0, 0, 0)


# The calls may not push input into a terminal (TIOCSTI, TIOCLINUX: out-of-sandbox command
# execution through a shared terminal) and may make system calls only in the machine's native ABI
# (a 32-bit or x32 call could dodge the ioctl check). Refused by a seccomp filter the worker
# installs on itself, which every call inherits; this is what lets the worker stay in its
# parent's session instead of starting one of its own (see _autogroup_takes_nice for why that
# matters). Per machine: (audit arch, number of ioctl); solvers/pool.py FILTER_MACHINES names them.
NATIVE_ABIS = {"x86_64": (0xC000003E, 16), "aarch64": (0xC00000B7, 29)}
TERMINAL_INPUT_IOCTLS = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
_SECCOMP_ALLOW, _SECCOMP_KILL_PROCESS, _SECCOMP_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_X32_SYSCALL_BIT = 0x40000000


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def terminal_filter(audit_arch: int, ioctl_nr: int) -> bytes:
    """The classic-BPF seccomp program (struct sock_filter entries: code, jt, jf, k). It reads
    struct seccomp_data: nr at offset 0, arch at 4, the low 32 bits of args[1] at 24 (the kernel
    takes an ioctl's request as 32 bits, so the high half cannot hide one)."""
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),
        (_BPF_JEQ_K, 1, 0, audit_arch),
        (_BPF_RET_K, 0, 0, _SECCOMP_KILL_PROCESS),  # a foreign ABI: the process dies
        (_BPF_LD_W_ABS, 0, 0, 0),
        (_BPF_JGE_K, 6, 0, _X32_SYSCALL_BIT),  # x32 numbers: killed (index 11)
        (_BPF_JEQ_K, 0, 3, ioctl_nr),  # not an ioctl: allowed (index 9)
        (_BPF_LD_W_ABS, 0, 0, 24),
        (_BPF_JEQ_K, 2, 0, TERMINAL_INPUT_IOCTLS[0]),  # refused with EPERM (index 10)
        (_BPF_JEQ_K, 1, 0, TERMINAL_INPUT_IOCTLS[1]),
        (_BPF_RET_K, 0, 0, _SECCOMP_ALLOW),
        (_BPF_RET_K, 0, 0, _SECCOMP_ERRNO | errno.EPERM),
        (_BPF_RET_K, 0, 0, _SECCOMP_KILL_PROCESS),
    ]
    return b"".join(struct.pack("=HBBI", *op) for op in program)


def _refuse_terminal_input() -> str:
    """Installs terminal_filter on this process; '' when done, else why not."""
    abi = NATIVE_ABIS.get(os.uname().machine)
    if abi is None:
        return f"no seccomp filter for machine {os.uname().machine}"
    code = terminal_filter(*abi)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.addressof(buf))
    ulong = ctypes.c_ulong
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, ulong(1), ulong(0), ulong(0), ulong(0)) != 0:
        return f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
    if _libc.prctl(PR_SET_SECCOMP, ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog), ulong(0), ulong(0)) != 0:
        return f"prctl(PR_SET_SECCOMP): {os.strerror(ctypes.get_errno())}"
    return ""


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(fd: int) -> tuple[dict | None, float]:
    """The next request and when its first byte arrived: the call's time limit runs from then,
    so reading, decoding and staging a huge request count against it."""
    header = _read_exact(fd, 8)
    arrived = time.monotonic()
    if header is None:
        return None, arrived
    body = _read_exact(fd, struct.unpack(">Q", header)[0])
    if body is None:
        return None, arrived
    req = json.loads(body)
    files = {}
    for name, size in req.pop("file_sizes", []):  # the files follow the request, raw
        data = _read_exact(fd, int(size)) if size else b""
        if data is None:
            return None, arrived
        files[name] = data
    req.setdefault("files", {}).update(files)
    return req, arrived


def _send(fd: int, message: dict) -> None:
    body = json.dumps(message).encode()
    data = struct.pack(">Q", len(body)) + body
    while data:
        data = data[os.write(fd, data):]


# ---------------------------------------------------------------- child side


def _apply_limits(limits: dict) -> None:
    cpu = limits.get("cpu_s")
    if cpu:
        soft = max(1, int(cpu + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
    if limits.get("memory_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
    if limits.get("file_bytes"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("nofile"):
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits["nofile"],) * 2)
    # RLIMIT_NPROC counts every process of the real uid on the host and is not enforced for
    # root at all: a worker running as root hands the call to an unprivileged uid (_drop_to).
    if limits.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"],) * 2)


def _drop_to(ids: tuple[int, int] | None) -> None:
    """In the call's child: become the unprivileged uid/gid (no supplementary groups, and so no
    capabilities), so that the kernel enforces RLIMIT_NPROC, which it never does for root."""
    if ids is None:
        return
    uid, gid = ids
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _access_mode(path: str) -> int | None:
    """What a call needs of `path`: to search a folder or run a program, else to read a file
    (None: not there even for root, so nothing a call could use)."""
    try:
        st_mode = os.stat(path).st_mode
    except OSError:
        return None
    return os.X_OK if (st_mode & 0o111) else os.R_OK


def _probe_drop(uid: int, gid: int, need: list[str]) -> str:
    """Whether a forked child can switch to uid:gid and still reach what a call needs (the
    runtime, the work root, every planner file). Returns "" when it can, else the reason."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        why = ""
        try:
            modes = [(path, _access_mode(path)) for path in need]  # as root: what each one is
            _drop_to((uid, gid))
            blocked = [path for path, mode in modes if mode is not None and not os.access(path, mode)]
            if blocked:
                why = f"uid {uid} cannot reach {blocked[0]}"
        except OSError as exc:
            why = f"cannot switch to uid {uid}: {exc}"
        os.write(write_end, why.encode()[:1000])
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        why = fh.read().decode("utf-8", "replace")
    os.waitpid(pid, 0)
    return why


def _call_ids(config: dict, root: str) -> tuple[tuple[int, int] | None, str]:
    """The uid/gid calls run as when the worker is root (None: calls keep the worker's uid) and,
    when the configured drop is impossible here, why (said once on stderr; calls still run)."""
    uid = config.get("call_uid")
    if uid is None or os.getuid() != 0:
        return None, ""
    gid = int(config.get("call_gid", uid))
    os.chmod(root, 0o711)  # the call directories below it must be reachable for that uid
    need = [root, os.path.dirname(os.__file__), os.path.realpath(sys.executable), *config.get("reach", [])]
    if config.get("fd_bin"):
        need.append(config["fd_bin"])
    why = _probe_drop(int(uid), gid, need)
    if why:
        os.write(2, f"halo solver worker: calls run as root, RLIMIT_NPROC is not enforced: {why}\n".encode())
        return None, why
    return (int(uid), gid), ""


def _failing_file(exc: BaseException) -> str:
    """Which input a translator crash happened in, from the parser frames on its traceback."""
    side = "unknown"
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        name = frame.f_code.co_name
        if name == "parse_pddl_file":
            side = str(frame.f_locals.get("type", side))
        elif name == "parse_domain_pddl":
            side = "domain"
        elif name == "parse_problem_pddl":
            side = "problem"
        tb = tb.tb_next
    return side


def _translate_then_search(req: dict) -> None:
    from fast_downward.translate import options as fd_options  # imported by the worker already
    from fast_downward.translate import pddl_parser
    from fast_downward.translate.main import main as translate_main

    def on_sigxcpu(signum, frame):  # noqa: ARG001
        print("\nTranslator hit the time limit", flush=True)
        os._exit(TRANSLATE_OUT_OF_TIME)

    signal.signal(signal.SIGXCPU, on_sigxcpu)
    sys.argv = ["translate", "domain.pddl", "problem.pddl", "--sas-file", "output.sas"]
    fd_options.set_options(sys.argv[1:])
    code = 0
    try:
        # Freed on MemoryError so the handler can print. bytes(n) is calloc'd: it takes address
        # space (what RLIMIT_AS counts) without touching 10 MB of pages on every call.
        emergency = bytes(10**7)  # noqa: F841
        translate_main()
    except MemoryError:
        emergency = None  # noqa: F841
        print("\nTranslator ran out of memory (MemoryError)")
        code = TRANSLATE_OUT_OF_MEMORY
    except pddl_parser.ParseError as exc:
        print(exc)
        code = TRANSLATE_INPUT_ERROR
    except SystemExit as exc:
        if isinstance(exc.code, int):
            code = exc.code or TRANSLATE_CRITICAL_ERROR
        else:
            print(exc.code)
            code = TRANSLATE_CRITICAL_ERROR
    except RecursionError as exc:
        print("\nError: the input is nested too deeply for the translator (RecursionError)")
        print(f"HALO-failing-file: {_failing_file(exc)}")
        code = TRANSLATE_CRITICAL_ERROR
    except BaseException as exc:  # any crash of the translator on hostile input is a result, not an escape
        import traceback

        traceback.print_exc(file=sys.stdout)
        print(f"HALO-failing-file: {_failing_file(exc)}")
        code = TRANSLATE_CRITICAL_ERROR
    sys.stdout.flush()
    sys.stderr.flush()
    if code:
        os._exit(code)
    with open("translated", "w"):
        pass
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    sas = os.open("output.sas", os.O_RDONLY)
    os.dup2(sas, 0)
    os.close(sas)
    binary = req["search_binary"]
    os.execve(binary, [binary, *req["search_args"], "--internal-plan-file", "sas_plan"], req["env"])


def _child(req: dict, calldir: str, out_w: int, ids: tuple[int, int] | None = None) -> None:
    """Runs in the forked child; never returns."""
    # What the worker built (the translator's modules, the check's caches) is shared with it
    # copy-on-write: out of the collector's sight, a collection in the translator does not
    # write to, and so copy, every page of it.
    gc.freeze()
    try:
        os.setpgid(0, 0)  # the worker's group kills it; its session (no terminal) keeps its CPU share
        if req.get("confine", True):
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.chdir(calldir)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.closerange(3, 65536)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        if req.get("confine", True):
            _apply_limits(req.get("limits", {}))
            _drop_to(ids)
        env = dict(req["env"], HOME=calldir, TMPDIR=calldir)
        req["env"] = env
        os.environ.clear()
        os.environ.update(env)
        if req["kind"] == "fd":
            _translate_then_search(req)
        else:
            argv = req["argv"]
            try:
                os.execve(argv[0], argv, req["env"])
            except OSError as exc:
                os.write(2, f"cannot execute {argv[0]!r}: {exc}\n".encode())
                os._exit(EXIT_EXEC_FAILED)
    except BaseException as exc:  # never let the child fall back into the worker's loop
        try:
            os.write(2, f"worker child failed: {exc!r}\n".encode())
        finally:
            os._exit(EXIT_CHILD_SETUP)
    os._exit(EXIT_CHILD_SETUP)


# ---------------------------------------------------------------- worker side


def _children() -> list[int]:
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _reap_everything() -> int:
    """Kill and reap every child (the subreaper inherits escaped grandchildren). Returns how many
    were left over beyond the call's own child."""
    extra = 0
    for _ in range(200):
        kids = _children()
        if not kids:
            break
        for pid in kids:
            extra += 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in kids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    while True:  # collect anything already dead
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return extra


class _Capture:
    """Keeps the first HEAD_BYTES and the last `tail` bytes of a stream."""

    def __init__(self, tail: int):
        self.head = bytearray()
        self.tail = bytearray()
        self.tail_cap = tail
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {dropped} bytes dropped ...]\n".encode() if dropped > 0 else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", "replace")


def _raw(data: bytes | str) -> bytes:
    """A request file's bytes: sent raw after the request, or base64 inside it."""
    return data if isinstance(data, bytes) else base64.b64decode(data)


def _write_files(calldir: str, files: dict[str, bytes | str]) -> None:
    for name, data in files.items():
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"bad file name {name!r}")
        with open(os.path.join(calldir, name), "wb") as fh:
            fh.write(_raw(data))


def _collect(calldir: str, prefixes: list[str], cap: int) -> dict[str, str]:
    found = {}
    try:
        names = sorted(os.listdir(calldir))
    except OSError:
        return found
    for name in names:
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            path = os.path.join(calldir, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as fh:
                    found[name] = base64.b64encode(fh.read(cap)).decode()
    return found


def _pump(pid: int, out_r: int, capture: _Capture, deadline: float):
    """Read the child's output until it exits or the deadline passes. A grandchild that keeps
    the pipe open does not hold the call: the child's exit (seen on a pidfd) ends the wait."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    fds = [out_r] + ([pidfd] if pidfd is not None else [])
    timed_out = False
    status = rusage = None
    try:
        while True:
            wait = deadline - time.monotonic()
            if wait <= 0:
                timed_out = True
                break
            ready, _, _ = select.select(fds, [], [], wait if pidfd is not None else min(wait, 0.005))
            if out_r in ready:
                data = os.read(out_r, 65536)
                if data:
                    capture.add(data)
                else:
                    fds.remove(out_r)
            if pidfd is None or pidfd in ready:
                done, st, ru = os.wait4(pid, os.WNOHANG)
                if done:
                    status, rusage = st, ru
                    break
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return timed_out, status, rusage


_check_module = None
_reap_after_answer: list[int] = []


def _pddl_check():  # noqa: ANN202  (the module, loaded by path: this script has no package)
    global _check_module
    if _check_module is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pddl_check.py")
        spec = importlib.util.spec_from_file_location("halo_pddl_check", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        _check_module = module
    return _check_module


def _check_budget(timeout_s: float, text_bytes: int) -> float:
    """Seconds the check may take: 80% of the call's, and less on a huge input (what comes after
    the deadline, ending the check and answering, grows with it: 0.3 s + 0.2 s per 10 MB kept)."""
    return max(0.0, min(0.8 * timeout_s, timeout_s - 0.3 - text_bytes / 50e6))


# Inputs above this size are checked in a forked child that is killed at the deadline: freeing
# the half-built parse of a 50 MB problem would take seconds past the limit.
FORK_CHECK_BYTES = 2_000_000


def _verdict(check, texts: list[str], deadline: float) -> dict:  # noqa: ANN001  (the module)
    try:
        error = check.check_plan(*texts, deadline) if len(texts) == 3 else check.check(*texts, deadline)
    except check.CheckTimeout:
        return {"timed_out": True}
    except check.CheckFailed as exc:
        return {"failed": str(exc)}
    return {"passed": True} if error is None else {"error": error.to_dict()}


def _forked_verdict(check, texts: list[str], deadline: float) -> dict:  # noqa: ANN001
    """The verdict from a forked child, which is killed (not unwound) when the deadline passes."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child)
        try:
            os.close(read_end)
            data = json.dumps(_verdict(check, texts, deadline)).encode()
            while data:
                data = data[os.write(write_end, data):]
        finally:
            os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    try:
        while (wait := deadline + 0.05 - time.monotonic()) > 0:
            ready, _, _ = select.select([read_end], [], [], wait)
            if not ready:
                continue
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _reap_after_answer.append(pid)  # its memory is given back while the answer travels
    try:
        return json.loads(b"".join(chunks)) if chunks else {"timed_out": True}
    except ValueError:
        return {"timed_out": True}


def _static_check(req: dict, arrived: float) -> dict:
    """The strict check of the request's domain and problem (solvers/pddl_check.py), and of its
    plan's steps when a third name is given, inside the sandbox: hostile PDDL is parsed here, not
    in the client. A check that breaks answers "failed"."""
    names = req["check"]
    files = req.get("files", {})
    texts = [_raw(files[name]).decode("utf-8", "surrogateescape") for name in names]
    size = sum(len(text) for text in texts)
    deadline = arrived + _check_budget(float(req["timeout_s"]), size)
    if size > FORK_CHECK_BYTES:
        return _forked_verdict(_pddl_check(), texts, deadline)
    return _verdict(_pddl_check(), texts, deadline)


def _handle(req: dict, root: str, seq: int, arrived: float, ids: tuple[int, int] | None = None) -> dict:
    verdict = _static_check(req, arrived) if req.get("check") else None
    if verdict is not None and "passed" not in verdict:
        return {"ok": True, "check": verdict}
    answer = _run(req, root, seq, arrived, ids)
    if verdict is not None:
        answer["check"] = verdict
    return answer


def _hand_over(calldir: str, ids: tuple[int, int] | None) -> None:
    """Make the call's directory and its input files the call uid's own (it writes there)."""
    if ids is None:
        return
    for name in [*os.listdir(calldir), "."]:
        os.chown(os.path.join(calldir, name), *ids, follow_symlinks=False)


def _run(req: dict, root: str, seq: int, arrived: float, ids: tuple[int, int] | None = None) -> dict:
    calldir = os.path.join(root, f"call-{seq}")
    os.mkdir(calldir, 0o700)
    try:
        _write_files(calldir, req.get("files", {}))
        if not req.get("confine", True):
            ids = None
        _hand_over(calldir, ids)
        out_r, out_w = os.pipe()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(out_r)
            _child(req, calldir, out_w, ids)
        os.close(out_w)
        capture = _Capture(int(req.get("output_bytes", 1_000_000)))
        deadline = arrived + float(req["timeout_s"])
        timed_out, status, rusage = _pump(pid, out_r, capture, deadline)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        if status is None:
            _, status, rusage = os.wait4(pid, 0)
        wall = time.monotonic() - t0
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # grandchildren left in the call's group
        leftovers = _reap_everything()
        # Drain what is left in the pipe without blocking (writers are dead now).
        os.set_blocking(out_r, False)
        try:
            while data := os.read(out_r, 65536):
                capture.add(data)
        except BlockingIOError:
            pass
        os.close(out_r)
        answer = {
            "ok": True,
            "returncode": os.waitstatus_to_exitcode(status),
            "timed_out": timed_out,
            "wall_s": wall,
            "cpu_s": rusage.ru_utime + rusage.ru_stime,
            "maxrss_kb": rusage.ru_maxrss,
            "output": capture.text(),
            "output_bytes": capture.total,
            "leftover_processes": leftovers,
            "translated": os.path.exists(os.path.join(calldir, "translated")),
            "files": _collect(calldir, req.get("collect", []), int(req.get("collect_bytes", 4_000_000))),
        }
        return answer
    finally:
        shutil.rmtree(calldir, ignore_errors=True)


def _wipe(root: str) -> None:
    """In a private /tmp, remove whatever a call left outside its directory."""
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


_WARM_DOMAIN = """(define (domain warm) (:requirements :strips :typing :negative-preconditions :equality)
  (:types thing) (:predicates (at ?x - thing) (free ?x - thing))
  (:action go :parameters (?x ?y - thing) :precondition (and (at ?x) (not (at ?y)) (not (= ?x ?y)))
    :effect (and (at ?y) (not (at ?x)) (free ?x))))"""
_WARM_PROBLEM = "(define (problem w) (:domain warm) (:objects a b - thing) (:init (at a)) (:goal (at b)))"


def _warm_translator(root: str) -> None:
    """Translate one tiny task in the worker itself, before any fork: what the translator does
    lazily on its first run (imports inside functions, compiled patterns) is then done once and
    every call's child inherits it. Its output is discarded; a failure only loses the gain."""
    from fast_downward.translate import options as fd_options
    from fast_downward.translate.main import main as translate_main

    warmdir = os.path.join(root, "warm-up")
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    out = os.dup(1)
    try:
        os.makedirs(warmdir, exist_ok=True)
        os.chdir(warmdir)
        for name, text in (("domain.pddl", _WARM_DOMAIN), ("problem.pddl", _WARM_PROBLEM)):
            with open(name, "w") as fh:
                fh.write(text)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        sys.argv = ["translate", "domain.pddl", "problem.pddl", "--sas-file", "output.sas"]
        fd_options.set_options(sys.argv[1:])
        translate_main()
    except BaseException:  # noqa: BLE001,S110  (best effort by design)
        pass
    finally:
        import fast_downward.translate.main as fd_main

        # Its only module-level state: two statistics counters it prints; a call starts from 0.
        fd_main.simplified_effect_condition_counter = fd_main.added_implied_precondition_counter = 0
        sys.stdout.flush()
        os.dup2(out, 1)
        os.close(out)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        shutil.rmtree(warmdir, ignore_errors=True)


def _autogroup_takes_nice(tries: int = 10) -> None:
    """Give this worker's scheduling group the worker's nice value; only for a worker in a
    session of its own (where no seccomp filter could be installed: see _refuse_terminal_input).

    With the kernel's autogroups on (/proc/sys/kernel/sched_autogroup_enabled, the default of most
    distributions, for processes in the root cgroup), each session is a scheduling group weighted
    as nice 0 whatever the nice of its processes. A worker in a session of its own would take as
    much CPU as the whole session of the service that started it, and even at the group's nice 19
    its calls are scheduled as a group beside the service's, not below it: a decision replica that
    wakes waits out the group's time slice, where in one group the idle scheduling class of the
    plan runner's calls yields to it at once. So a worker stays in its parent's session when it
    can; when it cannot, its group takes the worker's nice. Best effort: no autogroups, or a write
    refused, leaves things as they were; the kernel lets an unprivileged process do this ten times
    a second machine-wide, hence the tries."""
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if nice <= 0 or not os.path.exists("/proc/self/autogroup"):
        return
    for _ in range(tries):
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write(str(nice))
            return
        except BlockingIOError:  # EAGAIN: another process set an autogroup's nice in the last 100 ms
            time.sleep(0.1)
        except OSError:
            return


def _confine_session(config: dict) -> None:
    """The worker's calls may not reach a terminal: by the seccomp filter in the parent's session
    (config "shared_session" and "terminal_filter"; exit 3 if it cannot be installed), else by a
    session of its own, which its pool started it in. Level "none" asks for neither."""
    if not config.get("shared_session"):
        _autogroup_takes_nice()
        return
    if not config.get("terminal_filter"):
        return
    why = _refuse_terminal_input()
    if why:
        os.write(2, f"cannot confine the solver calls' terminal access: {why} (HALO_SOLVER_OWN_SESSION=1 "
                    "starts the workers in a session of their own instead)\n".encode())
        sys.exit(3)


def main() -> None:
    config = json.loads(sys.argv[1])
    _confine_session(config)
    root = config["root"]
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints (none expected) go to stderr, never into the protocol
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if config.get("parent_pid") and os.getppid() != config["parent_pid"]:
        return  # the client died before the death signal was armed
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if config.get("fd_bin"):
        sys.path.insert(0, config["fd_bin"])
        import fast_downward.translate.main  # noqa: F401  (the point of the worker: import once)
        import fast_downward.translate.options  # noqa: F401
        import fast_downward.translate.pddl_parser  # noqa: F401
        if config.get("warm_up", True):
            _warm_translator(root)
    if config.get("warm_up", True):
        _pddl_check()
    ids, drop_error = _call_ids(config, root)
    _send(proto_out, {"ready": True, "pid": os.getpid(), "call_uid": ids[0] if ids else os.getuid(),
                      "drop_error": drop_error})
    seq = 0
    # The worker's own CPU for a call is part of what the call costs, next to the child's rusage
    # in "cpu_s": reading the request, staging files, fork, reaping, collecting output, cleanup,
    # answering. It is measured from one answer to the next (blocked reads cost no CPU), so an
    # answer's own encoding counts in the next call and every CPU second after start-up is
    # attributed to some call.
    mark = time.process_time()
    while True:
        req, arrived = _recv(proto_in)
        if req is None:
            break
        seq += 1
        sent_at = req.get("sent_at")
        if isinstance(sent_at, float) and 0.0 <= arrived - sent_at < 600.0:  # one host, one monotonic clock
            arrived = sent_at
        try:
            answer = _handle(req, root, seq, arrived, ids)
        except Exception as exc:  # a broken request is answered, the worker stays up
            answer = {"ok": False, "error": repr(exc)}
        if config.get("wipe_root"):
            _wipe(root)
        now = time.process_time()
        answer["host_cpu_s"], mark = now - mark, now
        _send(proto_out, answer)
        while _reap_after_answer:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(_reap_after_answer.pop(), 0)


if __name__ == "__main__":
    main()

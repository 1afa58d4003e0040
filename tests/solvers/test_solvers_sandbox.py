"""The runner itself, driven with hostile commands."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from solver_helpers import stray_processes

import solvers
from solvers import pool, sandbox
from solvers.limits import Limits

PYTHON, _ = sandbox.python_runtime()
BWRAP = solvers.sandbox_level() == "bwrap"


def py(code: str, **kwargs) -> sandbox.RunResult:
    return pool.run([PYTHON, "-I", "-S", "-c", code], **kwargs)


@pytest.fixture
def loopback_server():
    """A TCP listener on the host's 127.0.0.1 that counts connections."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    hits = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            hits.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join(2)
    server.close()


def test_level_is_reported():
    assert solvers.sandbox_level() in ("bwrap", "rlimits")
    assert py("print('hi')").level == solvers.sandbox_level()


@pytest.mark.skipif(not BWRAP, reason="network isolation needs bubblewrap")
def test_hostile_command_cannot_reach_the_network(loopback_server):
    port, hits = loopback_server
    probe = f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), timeout=2)\n print('CONNECTED')\n" \
            "except OSError as e:\n print('BLOCKED', e)"
    # Control: the same code outside the sandbox does connect.
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    result = py(probe)
    assert "BLOCKED" in result.output and "CONNECTED" not in result.output, result.output
    time.sleep(0.3)
    assert len(hits) == 1  # only the control connection arrived
    interfaces = py("import socket; print(sorted(n for _, n in socket.if_nameindex()))")
    assert interfaces.output.strip() in ("['lo']", "[]"), interfaces.output


@pytest.mark.skipif(not BWRAP, reason="file isolation needs bubblewrap")
def test_hostile_command_cannot_read_or_write_outside_its_directory(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    repo_file = Path(__file__).resolve()
    target = tmp_path / "planted.txt"
    code = f"""
import os
for path in ({str(secret)!r}, {str(repo_file)!r}, '/etc/passwd', '/root/.bashrc'):
    try:
        print('READ', path, open(path).read()[:20])
    except OSError as e:
        print('NOREAD', path, type(e).__name__)
for path in ({str(target)!r}, '/usr/planted', {str(repo_file.parent / 'planted.txt')!r}, '/tmp/outside.txt'):
    try:
        open(path, 'w').write('x'); print('WROTE', path)
    except OSError as e:
        print('NOWRITE', path, type(e).__name__)
open('mine.txt', 'w').write('ok'); print('OWN', os.getcwd(), open('mine.txt').read())
"""
    result = py(code)
    out = result.output
    assert "TOP-SECRET" not in out and not any(line.startswith("READ ") for line in out.splitlines()), out
    assert out.count("NOREAD") == 4, out
    assert "OWN /halo-work/call-" in out and out.rstrip().endswith("ok"), out
    assert "NOWRITE /tmp/outside.txt" in out  # the sandbox's /tmp is a read-only private tmpfs
    assert not target.exists() and not (repo_file.parent / "planted.txt").exists()
    assert not Path("/usr/planted").exists() and not Path("/tmp/outside.txt").exists()
    leftover = py("import os; print(sorted(os.listdir('/tmp')))")
    assert "outside.txt" not in leftover.output


def test_arguments_are_never_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    evil = f"; touch {marker}; $(touch {marker}) `touch {marker}`"
    result = pool.run(["/usr/bin/echo", evil])
    assert result.output.strip() == evil and not marker.exists()
    with pytest.raises(TypeError):
        pool.run(f"/usr/bin/echo {evil}")  # type: ignore[arg-type]
    # PDDL text is a file's content, never an argument.
    result = solvers.plan(f"(define (domain x)) {evil}", evil)
    assert result.category.is_parse_error and not marker.exists()


def test_wall_clock_kill_takes_the_whole_group_and_escapees():
    # The child forks a grandchild in its group and a double-forked one in its own session.
    code = """
import os, time
if os.fork() == 0:
    time.sleep(60)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
time.sleep(60)
"""
    t0 = time.monotonic()
    result = py(code, limits=Limits(timeout_s=1))
    assert result.timed_out and time.monotonic() - t0 < 2.5
    assert result.leftover_processes >= 2
    assert stray_processes() == []


def test_child_that_exits_early_leaving_a_daemon_does_not_hold_the_call():
    code = "import os, time\nif os.fork() == 0:\n    os.setsid(); time.sleep(30)\nprint('parent done')"
    t0 = time.monotonic()
    result = py(code, limits=Limits(timeout_s=20))
    assert result.returncode == 0 and "parent done" in result.output
    assert time.monotonic() - t0 < 3
    assert result.leftover_processes >= 1 and stray_processes() == []


def test_output_is_capped_head_and_tail():
    result = py("import sys\nfor i in range(200000): sys.stdout.write(f'line {i}\\n')",
                limits=Limits(output_bytes=4096))
    assert result.returncode == 0
    assert "line 0\n" in result.output and "line 199999" in result.output
    assert "bytes dropped" in result.output and len(result.output) < 30_000


def test_file_size_cap_stops_a_runaway_writer():
    result = py("f = open('big', 'wb')\nwhile True: f.write(b'x' * 65536)", limits=Limits(file_mb=2))
    assert result.returncode in (-25, 1), result  # SIGXFSZ, or the OSError it turns into


def test_cpu_and_memory_rlimits_apply():
    spin = py("while True: pass", limits=Limits(timeout_s=1.5))
    assert spin.returncode is not None and (spin.timed_out or spin.returncode == -24)
    hog = py("x = bytearray(600 * 1024 * 1024)\nprint('allocated')", limits=Limits(memory_mb=200))
    assert "allocated" not in hog.output and "MemoryError" in hog.output


def test_scrubbed_environment(monkeypatch):
    monkeypatch.setenv("HALO_SECRET_TOKEN", "leak-me")
    result = py("import os; print(sorted(os.environ))")
    assert "HALO_SECRET_TOKEN" not in result.output and "PATH" in result.output


def test_rlimits_level_also_confines_time_and_cleans_up():
    result = pool.run([PYTHON, "-I", "-S", "-c", "import time; time.sleep(30)"], limits=Limits(timeout_s=1),
                         level="rlimits")
    assert result.timed_out and result.level == "rlimits"
    ok = pool.run(["/usr/bin/cat", "x"], files={"x": b"\x00\xffbytes"}, level="rlimits")
    assert ok.returncode == 0 and ok.output.endswith("bytes")
    assert stray_processes() == []


def test_a_call_that_kills_its_worker_is_a_crash_and_the_next_call_works(bw_domain, bw_problem):
    killer = py("import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(2)",
                limits=Limits(timeout_s=10))
    if pool.get_pool()._idle[0].call_uid not in (None, 0):  # noqa: SLF001
        # A root worker runs the call as an unprivileged uid: it may not even signal its worker.
        assert killer.returncode == 1 and "PermissionError" in killer.output, killer
    else:
        assert killer.returncode is None and "worker" in killer.error
    assert solvers.plan(bw_domain, bw_problem).ok
    assert stray_processes() == []


def test_a_worker_that_died_while_idle_is_replaced(bw_domain, bw_problem):
    import psutil

    from solvers.pool import get_pool

    assert solvers.plan(bw_domain, bw_problem).ok
    for top in get_pool().worker_pids():
        for proc in [psutil.Process(top), *psutil.Process(top).children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):  # its sandbox goes down with the worker
                if "_worker.py" in " ".join(proc.cmdline()):
                    os.kill(proc.pid, signal.SIGKILL)
    time.sleep(0.2)
    assert solvers.plan(bw_domain, bw_problem).ok


SHARED_SESSION = pool.shares_session()
TERMINAL_PROBE = """
import errno, fcntl, os, termios
for name in ("TIOCSTI", "TCGETS"):
    try:
        fcntl.ioctl(0, getattr(termios, name), bytes(64) if name == "TCGETS" else b"x")
        print(name, "allowed")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
print("autogroup", open("/proc/self/autogroup").read().strip() if os.path.exists("/proc/self/autogroup") else "-")
"""


def _autogroup() -> str:
    path = Path("/proc/self/autogroup")
    return path.read_text().strip() if path.exists() else "-"


@pytest.mark.skipif(not SHARED_SESSION, reason="the seccomp filter knows only Linux x86_64 and aarch64")
def test_calls_cannot_push_input_into_a_terminal_and_share_the_callers_scheduling_group():
    lines = py(TERMINAL_PROBE).output.splitlines()
    # The filter answers EPERM before the kernel looks at the descriptor (a pipe: ENOTTY), while
    # every other ioctl reaches the kernel as before.
    assert lines[:2] == ["TIOCSTI EPERM", "TCGETS ENOTTY"], lines
    # No session of its own: the calls are one scheduling group with this process (autogroups).
    assert lines[2] == f"autogroup {_autogroup()}"


@pytest.mark.skipif(not SHARED_SESSION or os.uname().machine != "x86_64", reason="x32 system calls are x86_64's")
def test_a_call_in_another_abi_is_killed():
    x32_getpid = 0x40000000 | 39
    result = py(f"import ctypes\nprint('before', flush=True)\nctypes.CDLL(None).syscall({x32_getpid})\nprint('after')")
    assert result.returncode == -signal.SIGSYS and result.output == "before\n", result


def test_a_worker_told_to_keep_its_own_session_still_runs_calls(monkeypatch):
    monkeypatch.setenv("HALO_SOLVER_OWN_SESSION", "1")
    own = pool.WorkerPool(solvers.sandbox_level(), size=1)
    try:
        result = own.call({"kind": "exec", "argv": [PYTHON, "-I", "-S", "-c", TERMINAL_PROBE]}, files={},
                          limits=Limits())
    finally:
        own.close()
    assert result.returncode == 0, result
    lines = result.output.splitlines()
    assert lines[0] != "TIOCSTI EPERM"  # no filter: terminal input is kept away by the session alone
    if _autogroup() != "-":
        assert lines[2] != f"autogroup {_autogroup()}"


def test_level_none_confines_nothing_not_even_terminal_input():
    # "none" is the benchmarks' baseline of the sandbox's overhead: no filter either.
    result = pool.run([PYTHON, "-I", "-S", "-c", TERMINAL_PROBE], level="none")
    assert result.output.splitlines()[0] == "TIOCSTI ENOTTY", result


def test_the_pool_knows_the_machines_the_worker_has_a_filter_for():
    from solvers import _worker

    assert set(pool.FILTER_MACHINES) == set(_worker.NATIVE_ABIS)


@pytest.mark.skipif(not SHARED_SESSION, reason="the seccomp filter knows only Linux x86_64 and aarch64")
def test_a_kernel_that_refuses_the_filter_is_a_worker_start_failure_that_says_what_to_do(monkeypatch, tmp_path):
    worker = tmp_path / "_worker.py"
    refusal = "def _refuse_terminal_input():\n    return 'prctl(PR_SET_SECCOMP): refused for the test'\n\n\n"
    source = pool.WORKER_SCRIPT.read_text()
    assert source.count('if __name__ == "__main__":') == 1
    worker.write_text(source.replace('if __name__ == "__main__":', refusal + 'if __name__ == "__main__":'))
    check = tmp_path / "pddl_check.py"  # the worker loads the check from beside itself
    check.write_text(pool.CHECK_MODULE.read_text())
    monkeypatch.setattr(pool, "WORKER_SCRIPT", worker)
    monkeypatch.setattr(pool, "CHECK_MODULE", check)
    refused = pool.WorkerPool(solvers.sandbox_level(), size=1)
    try:
        result = refused.call({"kind": "exec", "argv": [PYTHON, "-I", "-S", "-c", "print('ran')"]}, files={},
                              limits=Limits())
    finally:
        refused.close()
    assert result.returncode is None and "ran" not in result.output
    assert "refused for the test" in result.error and "HALO_SOLVER_OWN_SESSION=1" in result.error, result

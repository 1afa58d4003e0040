"""A root worker hands each call to an unprivileged uid, so the call's process-count limit binds.

The kernel never enforces RLIMIT_NPROC for (host) uid 0; before this, a call run by a root worker
forked all 700 processes it asked for.
"""

from __future__ import annotations

import os

import pytest
from solver_helpers import stray_processes

from solvers import pool, sandbox
from solvers.limits import Limits

PYTHON, _ = sandbox.python_runtime()
NPROC_LIMIT = 512  # what solvers/pool.py gives every call
ASKED = 700

# Forks ASKED sleeping children (each exits on its own after a few seconds) and prints how many
# forks succeeded, and its uid.
FORK_LOOP = f"""
import os, time
made = 0
for _ in range({ASKED}):
    try:
        pid = os.fork()
    except OSError as exc:
        print('fork refused:', exc.errno)
        break
    if pid == 0:
        time.sleep(4)
        os._exit(0)
    made += 1
print('forked', made, 'uid', os.getuid())
"""


def _levels() -> list[str]:
    return ["bwrap", "rlimits"] if sandbox.sandbox_level() == "bwrap" else ["rlimits"]


def _forked(output: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith("forked "))
    return int(line.split()[1])


@pytest.mark.parametrize("level", _levels())
def test_a_root_workers_call_is_bounded_by_its_process_limit(level: str) -> None:
    if os.geteuid() != 0:
        print("skipped: the test is about root workers; this process is not root")
        pytest.skip("needs root: RLIMIT_NPROC is already enforced for an unprivileged worker")
    worker_pool = pool.get_pool(level)
    worker_pool.warm(1)
    worker = worker_pool._idle[0]  # noqa: SLF001  (what the worker said when it started)
    if worker.call_uid != sandbox.DEFAULT_CALL_UID:
        reason = f"the {level} worker cannot drop root here: {worker.drop_error}"
        print("skipped:", reason)
        pytest.skip(reason)
    result = pool.run([PYTHON, "-I", "-S", "-c", FORK_LOOP], limits=Limits(timeout_s=30), level=level)
    print(f"{level}: {result.output.strip()}")
    assert result.returncode == 0, result.output
    assert f"uid {sandbox.DEFAULT_CALL_UID}" in result.output, result.output
    assert "fork refused: 11" in result.output, result.output  # EAGAIN: the limit said no
    assert _forked(result.output) < NPROC_LIMIT
    assert stray_processes() == []


def test_a_root_workers_call_still_writes_its_files_and_gets_them_back() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    code = "open('plan.1', 'w').write(open('in.txt').read().upper())"
    result = pool.run([PYTHON, "-I", "-S", "-c", code], files={"in.txt": "step"}, collect=("plan",))
    assert result.returncode == 0, result.output
    assert result.files == {"plan.1": b"STEP"}


def test_a_bad_call_uid_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    monkeypatch.setenv("HALO_SANDBOX_UID", "nobody")
    with pytest.raises(ValueError, match="HALO_SANDBOX_UID must be a numeric uid"):
        sandbox.call_uid()
    monkeypatch.setenv("HALO_SANDBOX_UID", "0")
    assert sandbox.call_uid() is None

"""A driver that started Ray in-process and is killed with SIGKILL leaves no Ray process behind.

Real Ray, real subprocess drivers. Without the watchdog, Ray's DashboardAgent and RuntimeEnvAgent
outlived a SIGKILLed driver (2 of its 8 session processes, still there after 20 s). Processes
are identified by pid and start time (their command lines are rewritten to `ray::...`, so a
name would not do) and any leftover is killed by pid at teardown: never `ray stop`, never pkill.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 15.0

DRIVER = textwrap.dedent("""
    import json, os, sys, time
    import ray
    from cluster.ray_cluster import shutdown, start_or_join

    handle = start_or_join(num_cpus=1, object_store_mb=80)

    @ray.remote
    def pid():
        return os.getpid()

    worker = ray.get(pid.remote())  # a worker process exists too
    info = {"session_dir": ray._private.worker._global_node.get_session_dir_path(), "worker": worker,
            "watchdog": handle.watchdog_pid}
    if sys.argv[1] == "shutdown":
        shutdown(handle)
        time.sleep(0.5)
        info["watchdog_alive"] = os.path.exists(f"/proc/{handle.watchdog_pid}")
    print(json.dumps(info), flush=True)
    time.sleep(600)
""")


def _start_driver(mode: str) -> tuple[subprocess.Popen, dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_DEDUP_LOGS="0")
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, mode], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, cwd=str(ROOT), start_new_session=True)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        proc.wait()
        pytest.fail("the driver died before it reported its Ray session")
    return proc, json.loads(line)


def _alive(known: dict[int, float]) -> dict[int, str]:
    alive = {}
    for pid, created in known.items():
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                alive[pid] = proc.name()
        except psutil.Error:
            continue
    return alive


@pytest.fixture
def session_processes():
    """The pids (with start times) of the Ray processes under test; leftovers killed by pid."""
    known: dict[int, float] = {}
    yield known
    for pid in _alive(known):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_sigkilled_driver_leaves_no_ray_process_behind(session_processes: dict[int, float]) -> None:
    driver, info = _start_driver("kill")
    try:
        _check_kill_leaves_nothing(driver, info, session_processes)
    finally:  # a failed check must not leave the driver itself running
        driver.kill()
        driver.wait()


def _check_kill_leaves_nothing(driver: subprocess.Popen, info: dict, session_processes: dict[int, float]) -> None:
    time.sleep(1.0)  # let the raylet finish starting its agents
    watchdog: dict[int, float] = {}
    for child in psutil.Process(driver.pid).children(recursive=True):
        (watchdog if child.pid == info["watchdog"] else session_processes)[child.pid] = child.create_time()
    assert watchdog, "the driver started no watchdog"
    names = sorted(_alive(session_processes).values())
    assert info["worker"] in session_processes and len(names) >= 4, names  # gcs, raylet, agents, a worker
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + BOUND_S
    while _alive(session_processes) and time.monotonic() < deadline:
        time.sleep(0.25)
    left = _alive(session_processes)
    print(f"session processes before the kill: {len(names)} {names}; left after it: {len(left)}")
    assert left == {}, f"Ray processes of {info['session_dir']} outlived the driver: {left}"
    session_processes.update(watchdog)  # killed at teardown if it hung on
    deadline = time.monotonic() + 5
    while _alive(watchdog) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(watchdog) == {}, "the watchdog outlived its job"


def test_a_clean_shutdown_also_ends_the_watchdog(session_processes: dict[int, float]) -> None:
    driver, info = _start_driver("shutdown")
    try:
        assert info["watchdog"] and info["watchdog_alive"] is False
    finally:
        driver.kill()
        driver.wait()

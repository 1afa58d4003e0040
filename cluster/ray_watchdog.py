"""Kills what a local Ray session left behind when the driver that started it dies.

A driver that starts Ray in-process (cluster/ray_cluster.py) owns its GCS, raylet, agents and
workers. `ray.shutdown()` stops them, but a driver killed with SIGKILL runs no shutdown, and
Ray's own fate-sharing does not reach everything: its dashboard and runtime-env agents (and
workers they started) kept running. This watchdog is a separate small process, in its own
session so it outlives the driver, that:

  * every POLL_S records the session's processes: those Ray's node started (GCS, raylet,
    monitors; their pids are passed in) and all their descendants (agents, workers), by pid and
    start time (a reused pid is never mistaken for one of them); other children of the driver
    are not its business;
  * when the driver is gone, kills by pid every recorded process still alive, their
    descendants, and any process whose command line names the session's directory or name.

It never runs `ray stop` and never matches by a broad name: other Ray clusters on the same
machine are untouched. Run as `python ray_watchdog.py DRIVER_PID SESSION_DIR [SESSION_PID...]`
(without session pids, every descendant of the driver counts) (a plain script:
it imports psutil only, not the project).
"""

from __future__ import annotations

import os
import sys
import time

import psutil

POLL_S = 0.5

Known = dict[int, float]  # pid -> create_time


def _alive(pid: int, created: float) -> psutil.Process | None:
    try:
        proc = psutil.Process(pid)
        return proc if abs(proc.create_time() - created) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE else None
    except psutil.Error:
        return None


def _record(tops: list[psutil.Process], known: Known) -> None:
    """Adds the session's processes alive now: the tops and all their descendants."""
    for top in tops:
        try:
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in procs:
            try:
                known.setdefault(proc.pid, proc.create_time())
            except psutil.Error:
                continue


def _tops(driver: psutil.Process, session_pids: list[int]) -> list[psutil.Process]:
    """The processes Ray's node started for this session (GCS, raylet, monitors), or, when the
    driver did not name them, the driver itself (all its descendants count then)."""
    tops = []
    for pid in session_pids:
        try:
            tops.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return tops or [driver]


def _named_in_cmdline(markers: tuple[str, ...]) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or ())
        if proc.pid != os.getpid() and any(marker in cmdline for marker in markers):
            found.append(proc)
    return found


def session_processes(known: Known, session_dir: str) -> list[psutil.Process]:
    """The session's processes alive now: recorded ones, their descendants, and any process whose
    command line names the session (its directory or its session_... name)."""
    procs: dict[int, psutil.Process] = {}
    for pid, created in known.items():
        proc = _alive(pid, created)
        if proc is None:
            continue
        procs[pid] = proc
        try:
            procs.update({child.pid: child for child in proc.children(recursive=True)})
        except psutil.Error:
            continue
    markers = (session_dir.rstrip("/"), os.path.basename(session_dir.rstrip("/")))
    procs.update({proc.pid: proc for proc in _named_in_cmdline(markers)})
    procs.pop(os.getpid(), None)
    return list(procs.values())


def kill_session(known: Known, session_dir: str) -> int:
    """SIGKILL the session's processes; returns how many were killed."""
    killed = 0
    for proc in session_processes(known, session_dir):
        try:
            proc.kill()
            killed += 1
        except psutil.Error:
            continue
    return killed


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def watch(driver_pid: int, session_dir: str, session_pids: list[int]) -> int:
    """Waits for the driver to die, then kills what is left of its session."""
    try:
        driver = psutil.Process(driver_pid)
    except psutil.Error:
        return 0
    tops = _tops(driver, session_pids)
    known: Known = {}
    while _running(driver):
        _record(tops, known)
        time.sleep(POLL_S)
    known.pop(os.getpid(), None)
    known.pop(driver_pid, None)
    killed = 0
    for _ in range(3):  # processes a dying raylet was still starting
        killed += kill_session(known, session_dir)
        time.sleep(POLL_S)
    return killed


def main() -> None:
    driver_pid, session_dir = int(sys.argv[1]), sys.argv[2]
    killed = watch(driver_pid, session_dir, [int(pid) for pid in sys.argv[3:]])
    if killed:
        print(f"ray watchdog: driver {driver_pid} died; killed {killed} leftover process(es) of {session_dir}",
              file=sys.stderr)


if __name__ == "__main__":
    main()

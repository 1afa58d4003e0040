"""Helpers of the solver tests: fixture paths and the process-table check."""

from __future__ import annotations

from pathlib import Path

import psutil

from solvers import pool

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pddl"
IPC = FIXTURES / "ipc"
TEMPORAL = FIXTURES / "ipc-temporal"
PLANBENCH_BW = FIXTURES / "planbench" / "blocksworld"


def ipc_cases() -> list[tuple[str, Path, Path]]:
    cases = []
    for domain_dir in sorted(IPC.iterdir()):
        for problem in sorted(domain_dir.glob("*.pddl")):
            if problem.name != "domain.pddl":
                cases.append((domain_dir.name, domain_dir / "domain.pddl", problem))
    return cases


def worker_infrastructure() -> set[int]:
    """Pids of the pool's own processes: each worker's Popen (bwrap or the worker) and, under
    bwrap, the sandbox's init and the worker inside it."""
    pids: set[int] = set()
    for p in list(pool._pools.values()):
        for top in p.worker_pids():
            try:
                proc = psutil.Process(top)
            except psutil.NoSuchProcess:
                continue
            pids.add(top)
            # bwrap -> bwrap (pid-namespace init) -> python _worker.py; nothing below that.
            for child in proc.children(recursive=True):
                try:
                    if child.name().startswith("bwrap") or "_worker.py" in " ".join(child.cmdline()):
                        pids.add(child.pid)
                except psutil.NoSuchProcess:  # exited (or a zombie, a subclass) since it was listed
                    continue
    return pids


# Descendants that existed before the current test began (e.g. an in-process Ray another test
# package started and is still tearing down): not this test's leftovers.
_preexisting: set[int] = set()


def mark_preexisting_processes() -> None:
    _preexisting.clear()
    _preexisting.update(p.pid for p in psutil.Process().children(recursive=True))
    _preexisting.difference_update(worker_infrastructure())


def new_descendants() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.pid not in _preexisting]


def stray_processes() -> list[str]:
    """Descendants of this test process, started during the test, that are neither a worker nor
    part of one: leftovers of a solver call (a search, a translator child, a hostile command)."""
    infra = worker_infrastructure()
    stray = []
    for proc in new_descendants():
        if proc.pid in infra:
            continue
        try:
            cmdline = " ".join(proc.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "multiprocessing.resource_tracker" in cmdline:  # Python's own helper, not a solver call
            continue
        stray.append(f"{proc.pid} {cmdline[:120]}")
    return stray

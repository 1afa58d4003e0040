"""Many threads and several processes call the solvers at once."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os

from solver_helpers import IPC, new_descendants, stray_processes

import solvers

CASES = [("blocksworld", "probBLOCKS-4-1.pddl"), ("logistics", "probLOGISTICS-4-2.pddl"), ("hanoi", "pfile3.pddl"),
         ("depots", "p01.pddl")]


def _texts(name: str, problem: str) -> tuple[str, str]:
    return (IPC / name / "domain.pddl").read_text(), (IPC / name / problem).read_text()


def solve_and_check(case: tuple[str, str]) -> tuple[str, float | None, bool, int]:
    """One task: plan, then validate the plan. Runs in threads and in child processes."""
    domain, problem = _texts(*case)
    result = solvers.plan(domain, problem)
    verdict = solvers.validate(domain, problem, result.plan_text) if result.ok else None
    return case[0], result.cost, bool(verdict and verdict.valid), os.getpid()


def _in_child_process(cases: list[tuple[str, str]]) -> list[tuple[str, float | None, bool, int]]:
    try:
        return [solve_and_check(case) for case in cases]
    finally:
        solvers.shutdown()


def test_threads_and_processes_at_once():
    expected = {case[0]: solve_and_check(case)[1] for case in CASES}
    spawn = multiprocessing.get_context("spawn")
    fork = multiprocessing.get_context("fork")  # a forked child must not reuse the parent's workers
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=spawn) as procs, \
            concurrent.futures.ProcessPoolExecutor(1, mp_context=fork) as forked, \
            concurrent.futures.ThreadPoolExecutor(8) as threads:
        proc_futures = [procs.submit(_in_child_process, CASES) for _ in range(2)]
        fork_future = forked.submit(_in_child_process, CASES)
        thread_results = list(threads.map(solve_and_check, CASES * 6))
        proc_results = [r for f in proc_futures for r in f.result(timeout=180)] + fork_future.result(timeout=180)
    for name, cost, valid, _ in thread_results + proc_results:
        assert valid, name
        assert cost == expected[name], (name, cost, expected[name])
    assert len({pid for *_, pid in proc_results}) >= 2
    assert {pid for *_, pid in thread_results} == {os.getpid()}
    assert stray_processes() == []


def test_pool_shutdown_leaves_no_process():
    solve_and_check(CASES[0])
    solvers.shutdown()
    left = [p for p in new_descendants() if "multiprocessing.resource_tracker" not in " ".join(p.cmdline())]
    assert left == []
    assert solve_and_check(CASES[0])[2]  # a later call starts a fresh worker

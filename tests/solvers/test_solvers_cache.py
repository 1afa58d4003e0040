"""The content-addressed result cache: repeated work is free, limit-dependent answers are never
kept, and the disk copy survives a new process's cache."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

import solvers
from solvers import cache
from solvers.results import ErrorCategory


@pytest.fixture
def cache_dir(tmp_path):
    solvers.configure_cache(True, directory=str(tmp_path))
    yield tmp_path
    solvers.configure_cache(False)


def test_a_repeated_plan_and_verdict_come_from_the_cache(cache_dir, bw_domain, bw_problem):
    first = solvers.plan(bw_domain, bw_problem)
    second = solvers.plan(bw_domain, bw_problem)
    assert first.ok and second.ok and second.plan == first.plan and second.cost == first.cost
    assert first.cpu_s > 0 and second.cpu_s == 0.0 and second.wall_s < first.wall_s
    verdict = solvers.validate(bw_domain, bw_problem, first.plan_text)
    again = solvers.validate(bw_domain, bw_problem, first.plan_text)
    assert verdict.valid and again.valid and again.cpu_s == 0.0
    stats = solvers.cache_stats()
    assert (stats["hits"], stats["misses"], stats["hit_rate"]) == (2, 2, 0.5)

    # Another configuration, or one changed character, is another key.
    optimal = solvers.plan(bw_domain, bw_problem, alias="seq-opt-lmcut")
    assert optimal.ok and solvers.cache_stats()["hits"] == 2
    other = solvers.plan(bw_domain, bw_problem.replace("(ON D C) (ON C A) ", ""))
    assert other.ok and other.plan != first.plan and solvers.cache_stats()["hits"] == 2


def test_the_disk_copy_serves_a_fresh_cache_and_a_damaged_file_is_a_miss(cache_dir, bw_domain, bw_problem):
    first = solvers.plan(bw_domain, bw_problem)
    solvers.configure_cache(True, directory=str(cache_dir))  # a new process's empty memory
    second = solvers.plan(bw_domain, bw_problem)
    assert second.plan == first.plan and second.cost == first.cost and solvers.cache_stats()["hits"] == 1
    for path in cache_dir.rglob("*.json"):
        path.write_text("{not json")
    solvers.configure_cache(True, directory=str(cache_dir))
    third = solvers.plan(bw_domain, bw_problem)
    assert third.ok and third.plan == first.plan and solvers.cache_stats()["misses"] == 1


def test_limit_dependent_answers_are_not_cached(cache_dir, bw_domain):
    big = "(define (problem big) (:domain BLOCKS) (:objects " + " ".join(f"b{i}" for i in range(40)) + \
          ") (:INIT (HANDEMPTY) " + " ".join(f"(ONTABLE b{i}) (CLEAR b{i})" for i in range(40)) + \
          ") (:goal (AND " + " ".join(f"(ON b{i} b{i + 1})" for i in range(39)) + ")))"
    result = solvers.plan(bw_domain, big, search="astar(blind())", limits=solvers.Limits(timeout_s=1))
    assert result.category in (ErrorCategory.SEARCH_TIMEOUT, ErrorCategory.MEMORY_LIMIT)
    assert solvers.cache_stats()["stores"] == 0
    broken = solvers.plan(bw_domain, big.replace("(HANDEMPTY)", "(HANDEMPTY) (sunny)"))
    assert broken.category is ErrorCategory.PARSE_ERROR_PROBLEM and solvers.cache_stats()["stores"] == 1


def test_the_cache_is_off_by_default_and_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setattr(cache, "_configured", False)
    monkeypatch.delenv("HALO_SOLVER_CACHE", raising=False)
    assert solvers.cache_stats() == {"enabled": False, "hits": 0, "misses": 0, "hit_rate": 0.0}
    monkeypatch.setattr(cache, "_configured", False)
    monkeypatch.setenv("HALO_SOLVER_CACHE", str(tmp_path / "c"))
    assert solvers.cache_stats()["directory"] == str(tmp_path / "c")
    solvers.configure_cache(False)


def test_threads_asking_one_key_at_once_share_one_planner_run(cache_dir, bw_domain, bw_problem):
    # a search's concurrent children reach one PDDL: one run, the others take its answer as a hit
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: solvers.plan(bw_domain, bw_problem), range(4)))
    assert all(r.ok and r.plan == results[0].plan and r.output_tail == results[0].output_tail for r in results)
    assert sorted(r.cpu_s > 0 for r in results) == [False, False, False, True]
    stats = solvers.cache_stats()
    assert (stats["stores"], stats["hits"], stats["misses"]) == (1, 3, 1)  # a waiter is one hit, not also a miss


def test_a_waiter_whose_answer_was_not_kept_computes_its_own(cache_dir):
    store = cache.current()
    started, release = threading.Event(), threading.Event()
    runs: list[str] = []

    def slow_timeout() -> solvers.PlanResult:
        runs.append("owner")
        started.set()
        release.wait(5)
        return solvers.PlanResult(category=ErrorCategory.SEARCH_TIMEOUT, planner="fd", message="time limit")

    def own() -> solvers.PlanResult:
        runs.append("waiter")
        return solvers.PlanResult(category=ErrorCategory.SEARCH_TIMEOUT, planner="fd", message="time limit")

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(store.compute_once, "k", slow_timeout)
        started.wait(5)
        second = pool.submit(store.compute_once, "k", own)
        release.set()
        assert first.result()[1] is False and second.result()[1] is False
    assert runs == ["owner", "waiter"]  # a timeout is never cached, so the waiter ran its own

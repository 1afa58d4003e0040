"""Limits that bound: the wall clock covers the check, staging and translation; wall_s is the
whole call; messages and tails stay small whatever the input."""

from __future__ import annotations

import time

import solvers
from solvers import api
from solvers.results import ErrorCategory

PREDICATES = " ".join(f"(p{i} ?x)" for i in range(50))


def huge_task(actions: int, tag: str) -> tuple[str, str]:
    body = "\n".join(f"(:action a{i} :parameters (?x ?y) :precondition (and (p{i % 50} ?x) (q ?y))"
                     f" :effect (and (p{(i + 1) % 50} ?y) (not (q ?y))))" for i in range(actions))
    domain = f"; {tag}\n(define (domain huge) (:requirements :strips) (:predicates {PREDICATES} (q ?x))\n{body})"
    objects = " ".join(f"o{i}" for i in range(300))
    init = " ".join(f"(p0 o{i}) (q o{i})" for i in range(300))
    problem = f"(define (problem h) (:domain huge) (:objects {objects}) (:init {init}) (:goal (and (p49 o1) (p49 o2))))"
    return domain, problem


def test_a_timeout_on_a_huge_domain_returns_within_half_a_second(bw_domain, bw_problem):
    assert solvers.plan(bw_domain, bw_problem).ok  # workers started: their start is not the point here
    limit = 2.0
    # 6 MB: the limit runs out in the static check; 300 KB: it runs out in the translator.
    for actions in (60_000, 3_000):
        domain, problem = huge_task(actions, f"{actions}-{time.time()}")
        t0 = time.monotonic()
        result = solvers.plan(domain, problem, limits=solvers.Limits(timeout_s=limit))
        took = time.monotonic() - t0
        assert result.category is ErrorCategory.SEARCH_TIMEOUT, (actions, result.message)
        assert took <= limit + 0.5, (actions, took, result.message)
        assert abs(result.wall_s - took) < 0.2, (result.wall_s, took)  # wall_s is the whole call


def test_messages_and_tails_are_capped(bw_domain, bw_problem):
    huge_line = "(:objects a b c d " + "\xe9" * 1_000_000 + ")"
    problem = bw_problem.replace("(:objects A C D B )", huge_line)
    result = solvers.plan(bw_domain, problem)
    assert result.category is ErrorCategory.PARSE_ERROR_PROBLEM, result.message[:300]
    assert len(result.message) <= api.MAX_MESSAGE and len(result.output_tail) <= api.MAX_TAIL


def test_a_50_mb_plan_line_is_a_plan_parse_error(bw_domain, bw_problem):
    t0 = time.monotonic()
    verdict = solvers.validate(bw_domain, bw_problem, "(pick-up " + "a" * 50_000_000 + ")\n")
    assert verdict.category is ErrorCategory.PARSE_ERROR_PLAN and verdict.location == "plan.txt:1:1"
    assert len(verdict.message) <= api.MAX_MESSAGE and time.monotonic() - t0 < 5

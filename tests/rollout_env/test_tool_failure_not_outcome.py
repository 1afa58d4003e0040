"""A solver wrapper that raises is a tool failure: evaluate() raises solvers.ToolFailure instead of
recording `solver_crash` as the step's (the task's) outcome."""

from __future__ import annotations

import asyncio

import pytest

import solvers
from rollout.core.state import EpisodeState
from rollout.loop import evaluation

DOMAIN = ("(define (domain d) (:requirements :strips) (:predicates (at ?x) (link ?x ?y))"
          " (:action go :parameters (?x ?y) :precondition (and (at ?x) (link ?x ?y))"
          " :effect (and (at ?y) (not (at ?x)))))")
PROBLEM = "(define (problem p) (:domain d) (:objects a b) (:init (at a) (link a b)) (:goal (at b)))"


def test_a_wrapper_exception_is_raised_as_a_tool_failure(monkeypatch):
    def broken(*args, **kwargs):  # noqa: ANN002,ANN003,ANN202
        raise RuntimeError("wrapper bug")

    monkeypatch.setattr(solvers, "validate", broken)
    state = EpisodeState(task_description="go", domain=DOMAIN, problem=PROBLEM, target_planner="fd")
    with pytest.raises(solvers.ToolFailure) as caught:
        asyncio.run(evaluation.evaluate(state, "(go a b)\n", False, "fd", solvers.Limits()))
    assert caught.value.category.is_tool_failure and "wrapper bug" in caught.value.message
    assert state.error_category == ""  # nothing was recorded as the step's outcome


def test_tool_and_task_failures_are_told_apart():
    assert solvers.ErrorCategory.SOLVER_CRASH.is_tool_failure and solvers.ErrorCategory.CHECK_FAILED.is_tool_failure
    assert not any(c.is_tool_failure for c in solvers.ErrorCategory
                   if c not in solvers.TOOL_FAILURE_CATEGORIES)
    assert not solvers.ErrorCategory.PLAN_INVALID.is_tool_failure


def test_a_tool_failure_answer_is_raised_not_recorded(monkeypatch):
    def crashed(domain, problem, plan_text, **kwargs):  # noqa: ANN001,ANN003,ANN202,ARG001
        return solvers.ValidationResult(solvers.ErrorCategory.SOLVER_CRASH, "val", message="VAL died on SIGSEGV")

    monkeypatch.setattr(solvers, "validate", crashed)
    state = EpisodeState(task_description="go", domain=DOMAIN, problem=PROBLEM, target_planner="fd")
    with pytest.raises(solvers.ToolFailure) as caught:
        asyncio.run(evaluation.evaluate(state, "(go a b)\n", False, "fd", solvers.Limits()))
    assert caught.value.category is solvers.ErrorCategory.SOLVER_CRASH and state.error_category == ""

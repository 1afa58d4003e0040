"""The gold check of a candidate: the real planner (sandboxed Fast Downward) solves it within
the limit, the real validator accepts the plan, and the difficulty measures are read off."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import solvers
from rollout.tasks.generators.draft import Candidate

_EXPANDED = re.compile(r"Expanded (\d+) state")
_STATUS = {solvers.ErrorCategory.UNSOLVABLE_PROVED: "unsolvable", solvers.ErrorCategory.NO_PLAN_FOUND: "unsolvable",
           solvers.ErrorCategory.SEARCH_TIMEOUT: "timeout", solvers.ErrorCategory.MEMORY_LIMIT: "timeout"}


@dataclass(frozen=True)
class Verdict:
    status: str  # gold | unsolvable | timeout | invalid_plan | trivial | planner_error
    plan: str = ""
    plan_length: int = 0
    plan_cost: float = 0.0
    planner_cpu_s: float = 0.0
    planner_wall_s: float = 0.0
    expansions: int = -1  # -1: the planner did not report it
    detail: str = ""
    planner: str = ""  # the program that answered ("temporal" may be Kairos where POPF crashed)

    def as_dict(self) -> dict:
        return asdict(self)


def solve_and_check(domain_text: str, problem_text: str, limits: solvers.Limits,
                    alias: str = "lama-first", planner: str = "fd") -> Verdict:
    result = solvers.plan(domain_text, problem_text, planner=planner, alias=alias, limits=limits)
    cat = result.category
    if cat is not solvers.ErrorCategory.OK or result.plan is None:
        status = _STATUS.get(cat, "planner_error")
        return Verdict(status, planner_cpu_s=result.cpu_s, planner_wall_s=result.wall_s, planner=result.planner,
                       detail=f"{cat.value}: {(result.message or result.output_tail)[-200:]}")
    plan_text = solvers.plan_to_text(result.plan)
    found = _EXPANDED.findall(result.output_tail)
    measures = dict(plan_length=len(result.plan), plan_cost=float(result.cost or len(result.plan)),
                    planner_cpu_s=result.cpu_s, planner_wall_s=result.wall_s,
                    expansions=int(found[-1]) if found else -1, planner=result.planner)
    if not result.plan:
        return Verdict("trivial", **measures, detail="the goal holds in the initial state")
    check = solvers.validate(domain_text, problem_text, plan_text, limits=limits)
    if not check.valid:
        # The validator shares the limit: running out of it says nothing about the plan.
        status = "timeout" if _STATUS.get(check.category) == "timeout" else "invalid_plan"
        return Verdict(status, plan_text, **measures,
                       detail=f"{check.category.value}: {(check.message or check.output_tail)[-200:]}")
    return Verdict("gold", plan_text, **measures)


def verify_batch(domain_text: str, candidates: list[Candidate], timeout_s: float,
                 memory_mb: int, planner: str = "fd") -> list[Verdict]:
    limits = solvers.Limits(timeout_s=timeout_s, memory_mb=memory_mb)
    return [solve_and_check(domain_text, c.problem, limits, planner=planner) for c in candidates]

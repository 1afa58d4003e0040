"""Run the real solvers on a step's new artefacts: validate a given plan, or plan then validate.

Used by the environment (rollout/env.py) after the draft and after each agent. Solver failures
are values (an `Evaluation` with a stable error category), never exceptions.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import solvers
from rollout.infra import InfraFailure
from rollout.state import EpisodeState

LOG_TAIL = 1500
_TMP_PATH = re.compile(r"/tmp/halo-[a-z]+-[A-Za-z0-9_]+/")


def _clean(text: str) -> str:
    return _TMP_PATH.sub("", text)[-LOG_TAIL:]


@dataclass
class Evaluation:
    plan: str
    plan_found: bool
    plan_valid: bool
    category: str
    validator_errors: str
    planner_log: str
    solver_cpu_s: float = 0.0

    def apply_to(self, state: EpisodeState) -> None:
        """Write the verdict into the state the policy sees next."""
        state.plan = self.plan
        state.plan_found = self.plan_found
        state.plan_valid = self.plan_valid
        state.error_category = self.category
        state.validator_errors = self.validator_errors
        state.planner_log = self.planner_log


async def _validate(domain: str, problem: str, plan: str, limits: solvers.Limits) -> solvers.ValidationResult:
    return await asyncio.to_thread(solvers.validate, domain, problem, plan, limits=limits)


async def evaluate(state: EpisodeState, outcome_plan: str, pddl_changed: bool, planner: str,
                   limits: solvers.Limits) -> Evaluation:
    """Run the real solvers on a step's new artefacts (as the loop does after an agent).

    An agent-supplied plan is validated; changed PDDL is planned and the plan validated; when
    the planner fails, the validator's diagnostics on the previous plan (parse errors, type
    mismatches, failing steps) are kept too. Solver exceptions become solver_crash.
    """
    try:
        return await _evaluate_inner(state, outcome_plan, pddl_changed, planner, limits)
    except (FileNotFoundError, PermissionError) as exc:  # the program cannot start: the tool failed, not the task
        raise InfraFailure("solver_unavailable", f"{type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001  (a solver wrapper bug must not end the episode)
        return Evaluation(outcome_plan or state.plan, False, False, solvers.ErrorCategory.SOLVER_CRASH.value,
                          "", f"solver call failed: {type(exc).__name__}: {exc}")


async def _evaluate_inner(state: EpisodeState, outcome_plan: str, pddl_changed: bool, planner: str,
                          limits: solvers.Limits) -> Evaluation:
    domain, problem = state.domain, state.problem
    if outcome_plan:
        v = await _validate(domain, problem, outcome_plan, limits)
        return Evaluation(outcome_plan, True, v.valid, v.category.value,
                          "" if v.valid else _clean(v.output_tail or v.message), "", v.cpu_s)
    if not pddl_changed:
        raise AssertionError("nothing to evaluate")
    if not domain.strip():
        return Evaluation("", False, False, solvers.ErrorCategory.INPUT_ERROR.value, "", "empty domain")
    result, v = await asyncio.to_thread(_plan_then_validate, domain, problem, planner, limits, state.plan)
    cpu = result.cpu_s or result.wall_s
    log = _clean(result.output_tail or result.message)
    if result.ok:
        return Evaluation(result.plan_text, True, v.valid, v.category.value,
                          "" if v.valid else _clean(v.output_tail or v.message), log, cpu + v.cpu_s)
    category = result.category.value
    if v.category.is_parse_error:
        category = v.category.value
    errors = _clean(v.output_tail or v.message) if not v.valid else ""
    return Evaluation(state.plan, False, False, category, errors, log, cpu + v.cpu_s)


def _plan_then_validate(domain: str, problem: str, planner: str, limits: solvers.Limits, previous_plan: str
                        ) -> tuple[solvers.PlanResult, solvers.ValidationResult]:
    """Both solver calls in one thread hand-off. The new plan is validated; when the planner failed,
    the previous plan (if any) is, as the validator's diagnostics are more specific (parse errors
    with positions, type mismatches, failing steps)."""
    result = solvers.plan(domain, problem, planner=planner, limits=limits)  # type: ignore[arg-type]
    plan = result.plan_text if result.ok else previous_plan
    return result, solvers.validate(domain, problem, plan, limits=limits)

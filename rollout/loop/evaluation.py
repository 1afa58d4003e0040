"""Run the real solvers on a step's new artefacts: validate a given plan, or plan then validate.

Used by the environment (rollout/loop/env.py) after the draft and after each agent. Task failures
are values (an `Evaluation` with a stable error category); a tool failure (a solver that could
not run or crashed, the strict check breaking) is raised as `solvers.ToolFailure`.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass

import solvers
from rollout.core.state import EpisodeState

LOG_TAIL = 1500
_TMP_PATH = re.compile(r"/tmp/halo-[a-z]+-[A-Za-z0-9_]+/")


def _clean(text: str) -> str:
    return _TMP_PATH.sub("", text)[-LOG_TAIL:]


_TAGGED = re.compile(r"\[[a-z_]+\.[a-z_]+\]")


def _verdict_text(v: solvers.ValidationResult) -> str:
    """What the loop observes of a verdict: one diagnostic format whichever validator judged.

    Agents, the rules layer and trained policies read Kairos' tagged lines ("step N (act): ...
    [validate.precondition_failed]"); a verdict whose report carries no such tag (VAL's) is
    rendered from its typed fields in that format, its own report kept after it."""
    if v.valid:
        return ""
    raw = v.output_tail or v.message
    if _TAGGED.search(raw):
        return _clean(raw)
    line = _tagged_line(v)
    return f"{line}\n{_clean(raw)[-max(0, LOG_TAIL - len(line) - 1):]}"


def _tagged_line(v: solvers.ValidationResult) -> str:
    if v.failing_step is not None and v.unsatisfied and not v.diagnostics:
        return (f"plan.txt:{v.failing_step}: error: step {v.failing_step} {v.failing_action}: precondition false: "
                f"{v.unsatisfied} is false [validate.precondition_failed]")
    if v.unreached_goal:
        return (f"plan.txt: error: the goal does not hold at the end of the plan: {v.unreached_goal} is false "
                "[validate.goal_not_reached]")
    code = v.diagnostics[0] if v.diagnostics else _CATEGORY_CODES.get(v.category, "validate.invalid")
    where = v.location or _CATEGORY_FILES.get(v.category, "plan.txt")
    return f"{where}: error: {v.message} [{code}]"


_CATEGORY_CODES = {solvers.ErrorCategory.PARSE_ERROR_DOMAIN: "parse.error",
                   solvers.ErrorCategory.PARSE_ERROR_PROBLEM: "parse.error",
                   solvers.ErrorCategory.PARSE_ERROR_PLAN: "parse.plan"}
_CATEGORY_FILES = {solvers.ErrorCategory.PARSE_ERROR_DOMAIN: "domain.pddl",
                   solvers.ErrorCategory.PARSE_ERROR_PROBLEM: "problem.pddl"}


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


def loop_validator() -> str:
    """The validator inside the refinement loop: Kairos unless HALO_ROLLOUT_VALIDATOR names
    another. The loop's observations are then one fixed report format (what agents, the rules
    layer and trained policies read) and a simulated world's episodes do not depend on which
    programs a machine has; Kairos agreed with VAL on every verdict of benchmarks/validators.py."""
    return os.environ.get("HALO_ROLLOUT_VALIDATOR", "").strip().lower() or "kairos"


async def _validate(domain: str, problem: str, plan: str, limits: solvers.Limits) -> solvers.ValidationResult:
    return await asyncio.to_thread(solvers.validate, domain, problem, plan, limits=limits,
                                   validator=loop_validator())


async def evaluate(state: EpisodeState, outcome_plan: str, pddl_changed: bool, planner: str,
                   limits: solvers.Limits) -> Evaluation:
    """Run the real solvers on a step's new artefacts (as the loop does after an agent).

    An agent-supplied plan is validated; changed PDDL is planned and the plan validated; when
    the planner fails, the validator's diagnostics on the previous plan (parse errors, type
    mismatches, failing steps) are kept too. An exception of the solver wrappers, or an answer in
    a tool-failure category (solver_crash, check_failed), is the tool's failure, not the task's: it
    is raised as solvers.ToolFailure (the episode reports it as an error of the run), never
    recorded as the step's outcome.
    """
    try:
        evaluation = await _evaluate_inner(state, outcome_plan, pddl_changed, planner, limits)
    except Exception as exc:
        raise solvers.ToolFailure(solvers.ErrorCategory.SOLVER_CRASH,
                                  f"solver call failed: {type(exc).__name__}: {exc}") from exc
    category = solvers.ErrorCategory(evaluation.category)
    if category.is_tool_failure:  # the program, not the task, failed: no outcome to record
        raise solvers.ToolFailure(category, evaluation.planner_log or evaluation.validator_errors)
    return evaluation


async def _evaluate_inner(state: EpisodeState, outcome_plan: str, pddl_changed: bool, planner: str,
                          limits: solvers.Limits) -> Evaluation:
    domain, problem = state.domain, state.problem
    if outcome_plan:
        v = await _validate(domain, problem, outcome_plan, limits)
        return Evaluation(outcome_plan, True, v.valid, v.category.value,
                          _verdict_text(v), "", v.cpu_s)
    if not pddl_changed:
        raise AssertionError("nothing to evaluate")
    if not domain.strip():
        return Evaluation("", False, False, solvers.ErrorCategory.INPUT_ERROR.value, "", "empty domain")
    result, v = await asyncio.to_thread(_plan_then_validate, domain, problem, planner, limits, state.plan)
    cpu = result.cpu_s or result.wall_s
    log = _clean(result.output_tail or result.message)
    if result.ok:
        return Evaluation(result.plan_text, True, v.valid, v.category.value,
                          _verdict_text(v), log, cpu + v.cpu_s)
    category = result.category.value
    if v.category.is_parse_error:
        category = v.category.value
    errors = _verdict_text(v)
    return Evaluation(state.plan, False, False, category, errors, log, cpu + v.cpu_s)


def _plan_then_validate(domain: str, problem: str, planner: str, limits: solvers.Limits, previous_plan: str
                        ) -> tuple[solvers.PlanResult, solvers.ValidationResult]:
    """Both solver calls in one thread hand-off. The new plan is validated; when the planner failed,
    the previous plan (if any) is, as the validator's diagnostics are more specific (parse errors
    with positions, type mismatches, failing steps)."""
    result = solvers.plan(domain, problem, planner=planner, limits=limits)  # type: ignore[arg-type]
    plan = result.plan_text if result.ok else previous_plan
    return result, solvers.validate(domain, problem, plan, limits=limits, validator=loop_validator())

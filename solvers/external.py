"""Optional external tools, used when they are on PATH: POPF (temporal planner) and VAL's
`Validate`. Neither ships as a wheel; without them Kairos does both jobs."""

from __future__ import annotations

import re

from solvers import locate
from solvers.limits import Limits
from solvers.plans import parse_plan
from solvers.results import ErrorCategory, PlanResult, PlanStep, ValidationResult
from solvers.sandbox import RunResult

_STEP_LINE = re.compile(r"^\s*[0-9.]+\s*:\s*\(.*\)\s*(\[[0-9.]+\])?\s*$")


def popf_argv(limits: Limits) -> list[str]:  # noqa: ARG001  (limits are applied by the sandbox)
    binary = locate.popf_binary()
    if binary is None:
        raise FileNotFoundError("popf not on PATH")
    return [str(binary), "domain.pddl", "problem.pddl"]


def popf_result(run: RunResult) -> PlanResult:
    common = {"output_tail": run.output[-4000:], "wall_s": run.wall_s, "cpu_s": run.cpu_s}
    if run.returncode is None or run.timed_out:
        cat = ErrorCategory.SEARCH_TIMEOUT if run.timed_out else ErrorCategory.SOLVER_CRASH
        return PlanResult(cat, "popf", message=run.error, **common)
    out = run.output
    if ";;;; Solution Found" in out:
        # POPF prints every improved plan; the last block is the best.
        block = out.rsplit(";;;; Solution Found", 1)[1]
        steps: list[PlanStep] = parse_plan("\n".join(ln for ln in block.splitlines() if _STEP_LINE.match(ln)))
        makespan = max(((s.start or 0.0) + (s.duration or 0.0) for s in steps), default=0.0)
        return PlanResult(ErrorCategory.OK, "popf", steps, makespan, **common)
    if "Problem unsolvable" in out or ";; Problem unsolvable" in out:
        return PlanResult(ErrorCategory.UNSOLVABLE_PROVED, "popf", message="POPF proved the task unsolvable", **common)
    if re.search(r"Parse error|Syntax error|Error:", out):
        return PlanResult(ErrorCategory.PARSE_ERROR_DOMAIN if "domain" in out.lower() else
                          ErrorCategory.PARSE_ERROR_PROBLEM, "popf", message="POPF could not parse the task",
                          **common)
    if run.returncode < 0:
        return PlanResult(ErrorCategory.MEMORY_LIMIT if "bad_alloc" in out else ErrorCategory.SOLVER_CRASH, "popf",
                          message=f"POPF died on signal {-run.returncode}", **common)
    return PlanResult(ErrorCategory.NO_PLAN_FOUND, "popf", message="POPF found no plan", **common)


def val_argv() -> list[str]:
    binary = locate.val_binary()
    if binary is None:
        raise FileNotFoundError("VAL's Validate not on PATH")
    return [str(binary), "-v", "domain.pddl", "problem.pddl", "plan.txt"]


_VAL_STEP = re.compile(r"^\s*(?P<action>\([^()]*\)) has an unsatisfied precondition at time (?P<time>[0-9.]+)", re.M)
_VAL_SET = re.compile(r"\(Set (?P<cond>\(.*?\)) to (?P<value>true|false)\)")


def val_result(run: RunResult, plan_text: str) -> ValidationResult:
    out = run.output
    common = {"output_tail": out[-4000:], "wall_s": run.wall_s}
    if run.returncode is None or run.timed_out:
        cat = ErrorCategory.SEARCH_TIMEOUT if run.timed_out else ErrorCategory.SOLVER_CRASH
        return ValidationResult(cat, "val", message=run.error, **common)
    if "Plan valid" in out:
        return ValidationResult(ErrorCategory.OK, "val", valid=True, message="plan valid", **common)
    if "Errors:" in out or "Parser failed" in out or "Error:" in out:
        low = out.lower()
        cat = ErrorCategory.PARSE_ERROR_PLAN if "plan.txt" in low else (
            ErrorCategory.PARSE_ERROR_PROBLEM if "problem.pddl" in low else ErrorCategory.PARSE_ERROR_DOMAIN)
        return ValidationResult(cat, "val", message="VAL could not parse its input", **common)
    result = ValidationResult(ErrorCategory.PLAN_INVALID, "val", message="plan invalid", **common)
    step = _VAL_STEP.search(out)
    if step:
        action = step.group("action").lower()
        actions = ["(" + " ".join((s.name, *s.args)) + ")" for s in parse_plan(plan_text)]
        result.failing_action = action
        result.failing_step = actions.index(action) + 1 if action in actions else None
        cond = _VAL_SET.search(out, step.end())
        result.unsatisfied = cond.group("cond") if cond else None
    elif "Goal not satisfied" in out:
        cond = _VAL_SET.search(out)
        result.unreached_goal = cond.group("cond") if cond else "goal"
    return result

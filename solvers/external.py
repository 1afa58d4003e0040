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
    out = run.output
    if ";;;; Solution Found" not in out and (run.returncode is None or run.timed_out):
        cat = ErrorCategory.SEARCH_TIMEOUT if run.timed_out else ErrorCategory.SOLVER_CRASH
        return PlanResult(cat, "popf", message=run.error or "POPF found no plan in time", **common)
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
_VAL_SET = re.compile(r"\(Set (?P<cond>\(.*\)) to (?P<value>true|false)\)")
_VAL_ERROR = re.compile(r"^(?P<file>[^\s:]+): line: (?P<line>\d+): (?:Fatal )?Error: (?P<msg>.*)$", re.M)
VAL_FILES = {"domain.pddl": ErrorCategory.PARSE_ERROR_DOMAIN, "problem.pddl": ErrorCategory.PARSE_ERROR_PROBLEM,
             "plan.txt": ErrorCategory.PARSE_ERROR_PLAN}


def _failing_step(plan_text: str, action: str, time: float) -> int | None:
    """VAL reports the failing happening by time: step k of an untimed plan runs at time k."""
    try:
        steps = parse_plan(plan_text)
    except ValueError:
        return None
    if steps and steps[0].start is None:
        k = int(round(time))
        return k if 1 <= k <= len(steps) else None
    for number, step in enumerate(steps, 1):
        text = "(" + " ".join((step.name, *step.args)) + ")"
        if text == action and step.start is not None and abs(step.start - time) < 1e-3:
            return number
    return None


def val_result(run: RunResult, plan_text: str) -> ValidationResult:
    """Read VAL's `Validate -v` report. Its format: "Plan valid"; or "Plan failed to execute" with
    repair advice "(act) has an unsatisfied precondition at time T" + "(Set (atom) to true)"; or
    "Goal not satisfied" + "(Set (goal atom) to true)"; or "FILE: line: N: Error: ..."."""
    out = run.output
    common = {"output_tail": out[-4000:], "wall_s": run.wall_s, "cpu_s": run.cpu_s}
    if run.returncode is None or run.timed_out:
        cat = ErrorCategory.SEARCH_TIMEOUT if run.timed_out else ErrorCategory.SOLVER_CRASH
        return ValidationResult(cat, "val", message=run.error, **common)
    if "Plan valid" in out:
        return ValidationResult(ErrorCategory.OK, "val", valid=True, message="plan valid", **common)
    error = _VAL_ERROR.search(out)
    if error:
        name = error.group("file").rsplit("/", 1)[-1]
        cat = VAL_FILES.get(name, ErrorCategory.INPUT_ERROR)
        if "not supported" in error.group("msg").lower() or "unsupported" in error.group("msg").lower():
            cat = ErrorCategory.UNSUPPORTED_REQUIREMENT
        return ValidationResult(cat, "val", message=error.group("msg").strip(),
                                location=f"{name}:{error.group('line')}", **common)
    if "Bad plan description" in out or "Parser failed" in out:
        return ValidationResult(ErrorCategory.PARSE_ERROR_PLAN, "val", message="VAL could not read the plan",
                                location="plan.txt", **common)
    if "Plan failed" not in out and "Goal not satisfied" not in out:
        return ValidationResult(ErrorCategory.SOLVER_CRASH if run.returncode else ErrorCategory.INPUT_ERROR, "val",
                                message=f"unrecognised VAL report (exit code {run.returncode})", **common)
    result = ValidationResult(ErrorCategory.PLAN_INVALID, "val", message="plan invalid", **common)
    step = _VAL_STEP.search(out)
    if step:
        result.failing_action = step.group("action").lower()
        result.failing_step = _failing_step(plan_text, result.failing_action, float(step.group("time")))
        cond = _VAL_SET.search(out, step.end())
        if cond:
            atom = cond.group("cond").lower()
            result.unsatisfied = atom if cond.group("value") == "true" else f"(not {atom})"
        result.message = f"step {result.failing_step} {result.failing_action}: precondition unsatisfied"
    elif "Goal not satisfied" in out:
        cond = _VAL_SET.search(out)
        result.unreached_goal = cond.group("cond").lower() if cond else "goal"
        result.message = "the goal does not hold at the end of the plan"
    return result

"""Optional external tools, used when they are on PATH: POPF (temporal planner) and VAL's
`Validate`. Neither ships as a wheel; without them Kairos does both jobs.

Both are read in two steps: how the program ended (solvers.exits: a program that could not
start or died is `solver_crash` with its own words, never a task outcome), then its report.
"""

from __future__ import annotations

import os
import re

from solvers import locate
from solvers.exits import own_words, tool_failure
from solvers.limits import Limits
from solvers.plans import PlanParseError, parse_plan
from solvers.results import ErrorCategory, PlanResult, PlanStep, ValidationResult
from solvers.sandbox import RunResult

_STEP_LINE = re.compile(r"^\s*[0-9.]+\s*:\s*\(.*\)\s*(\[[0-9.]+\])?\s*$")
# "FILE: line: N: Error: MESSAGE", the parser diagnostics POPF and VAL share.
_FILE_ERROR = re.compile(r"^(?P<file>[^\s:]+): line: (?P<line>\d+): (?:Fatal )?Error: (?P<msg>.*)$", re.M)
FILES = {"domain.pddl": ErrorCategory.PARSE_ERROR_DOMAIN, "problem.pddl": ErrorCategory.PARSE_ERROR_PROBLEM,
         "plan.txt": ErrorCategory.PARSE_ERROR_PLAN}
_TYPE_ERRORS = re.compile(r"Type Errors Encountered in (?P<which>Domain|Problem) File")
_TYPE_DETAIL = re.compile(r"^(Type problem with .*|Object with unknown type: .*|.*incorrectly typed.*)$", re.M)


def popf_argv(limits: Limits) -> list[str]:  # noqa: ARG001  (limits are applied by the sandbox)
    binary = locate.popf_binary()
    if binary is None:
        raise FileNotFoundError("popf not on PATH")
    return [str(binary), "domain.pddl", "problem.pddl"]


def _popf_plan(out: str, common: dict) -> PlanResult:
    # POPF prints every improved plan; the last block is the best.
    block = out.rsplit(";;;; Solution Found", 1)[1]
    steps: list[PlanStep] = parse_plan("\n".join(ln for ln in block.splitlines() if _STEP_LINE.match(ln)))
    makespan = max(((s.start or 0.0) + (s.duration or 0.0) for s in steps), default=0.0)
    return PlanResult(ErrorCategory.OK, "popf", steps, makespan, **common)


def file_error(out: str) -> tuple[ErrorCategory, str, str] | None:
    """The first "FILE: line: N: Error: ..." of a POPF or VAL report: (category, location, message)."""
    error = _FILE_ERROR.search(out)
    if error is None:
        return None
    name = error.group("file").rsplit("/", 1)[-1]
    message = error.group("msg").strip()
    category = FILES.get(name, ErrorCategory.INPUT_ERROR)
    if "not supported" in message.lower() or "unsupported" in message.lower():
        category = ErrorCategory.UNSUPPORTED_REQUIREMENT
    return category, f"{name}:{error.group('line')}", message


def _popf_refusal(out: str) -> tuple[ErrorCategory, str] | None:
    """POPF's parse and type-check refusals: a parse error naming the file."""
    found = file_error(out)
    if found is not None:
        category, location, message = found
        return category, f"{location}: {message}"
    typed = _TYPE_ERRORS.search(out)
    if typed is not None:
        name = "domain.pddl" if typed.group("which") == "Domain" else "problem.pddl"
        detail = _TYPE_DETAIL.search(out)
        message = detail.group(0).strip() if detail else "type checking failed"
        return FILES[name], f"{name}: {message}"
    return None


def popf_result(run: RunResult) -> PlanResult:
    common = {"output_tail": run.output[-4000:], "wall_s": run.wall_s, "cpu_s": run.cpu_s}
    out = run.output
    if ";;;; Solution Found" in out:
        return _popf_plan(out, common)
    failed = tool_failure(run, "POPF")
    if failed is not None:
        return PlanResult(failed[0], "popf", message=failed[1], **common)
    if "deemed unsolvable" in out or "Problem unsolvable" in out:
        reason = re.search(r"The goal fact:\s*(\(.*\))", out)
        detail = f": goal {reason.group(1)} is unreachable" if reason else ""
        return PlanResult(ErrorCategory.UNSOLVABLE_PROVED, "popf", message=f"POPF proved the task unsolvable{detail}",
                          **common)
    refusal = _popf_refusal(out)
    if refusal is not None:
        return PlanResult(refusal[0], "popf", message=refusal[1], **common)
    if "Critical Errors Encountered" in out:
        return PlanResult(ErrorCategory.INPUT_ERROR, "popf", message=f"POPF refused the task: {own_words(out)}",
                          **common)
    if run.returncode == 0:
        return PlanResult(ErrorCategory.NO_PLAN_FOUND, "popf", message="POPF found no plan", **common)
    return PlanResult(ErrorCategory.SOLVER_CRASH, "popf",
                      message=f"POPF ended with exit code {run.returncode}: {own_words(out) or 'no message'}", **common)


# ---------------------------------------------------------------- VAL

# The planners space dependent happenings this far apart (POPF and Kairos: 0.001); VAL's own
# default tolerance (0.01) rejects every such plan. HALO_VAL_TOLERANCE overrides it.
DEFAULT_TOLERANCE = 0.001
# VAL refuses plans of this many steps or more ("Bad plan description!"); Kairos judges them.
VAL_MAX_STEPS = 9_996


def val_tolerance() -> float:
    raw = os.environ.get("HALO_VAL_TOLERANCE", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TOLERANCE
    except ValueError:
        return DEFAULT_TOLERANCE
    return value if 0 < value < 1 else DEFAULT_TOLERANCE


def val_argv(tolerance: float | None = None) -> list[str]:
    binary = locate.val_binary()
    if binary is None:
        raise FileNotFoundError("VAL's Validate not on PATH")
    tol = val_tolerance() if tolerance is None else tolerance
    return [str(binary), "-t", f"{tol:g}", "-v", "domain.pddl", "problem.pddl", "plan.txt"]


_VAL_VALID = re.compile(r"^Plan valid\s*$", re.M)
_VAL_STEP = re.compile(r"^\s*(?P<action>\([^()]*\))(?: - (?P<when>start|end))? has an unsatisfied precondition at "
                       r"time (?P<time>[-0-9.e+]+)", re.M)
_VAL_INVARIANT = re.compile(r"^\s*Invariant for (?P<action>\([^()]*\)) has its condition unsatisfied between time "
                            r"(?P<time>[-0-9.e+]+) to (?P<until>[-0-9.e+]+)", re.M)
# One condition of the repair advice: "(Set (atom) to true|false)" or "(Satisfy derived predicate (atom)!)".
_VAL_CONDITION = re.compile(r"\(Set (?P<atom>\(.*?\)) to (?P<value>true|false)\)|"
                            r"\(Satisfy derived predicate (?P<derived>\(.*?\)+)!\)")
_VAL_NO_ACTION = re.compile(r"No matching action defined for (?P<name>\S+)")


def _happening_step(steps: list[PlanStep], action: str, time: float, when: str | None, tolerance: float) -> int | None:
    """Which step VAL means: step k of an untimed plan runs at time k; a timed step by its start
    (or its end, for an end condition)."""
    if steps and steps[0].start is None:
        k = int(round(time))
        return k if 1 <= k <= len(steps) else None
    for number, step in enumerate(steps, 1):
        if "(" + " ".join((step.name, *step.args)) + ")" != action or step.start is None:
            continue
        at = step.start + (step.duration or 0.0) if when == "end" else step.start
        if when == "invariant":
            if step.start - tolerance <= time <= step.start + (step.duration or 0.0) + tolerance:
                return number
        elif abs(at - time) <= max(tolerance, 1e-6):
            return number
    return None


def _condition(out: str, start: int) -> str | None:
    """The first condition VAL's repair advice names after `start`, with its sign; a failed
    duration constraint when the advice names no condition (VAL also prints that line beside a
    condition when the duration itself is right)."""
    advice_end = out.find("Failed plans", start)
    advice = out[start:advice_end if advice_end >= 0 else len(out)]
    cond = _VAL_CONDITION.search(advice)
    if cond is None:
        return "?duration" if "Failed duration constraint" in advice else None
    if cond.group("derived"):
        return cond.group("derived").lower()
    atom = cond.group("atom").lower()
    return atom if cond.group("value") == "true" else f"(not {atom})"


def _steps(plan_text: str) -> list[PlanStep]:
    try:
        return parse_plan(plan_text)
    except ValueError:
        return []


def _val_failure(out: str, plan_text: str, result: ValidationResult) -> ValidationResult:
    found = _VAL_STEP.search(out) or _VAL_INVARIANT.search(out)
    steps = _steps(plan_text)
    if found is not None:
        when = found.groupdict().get("when") or ("invariant" if "Invariant" in found.group(0) else None)
        result.failing_action = found.group("action").lower()
        result.failing_step = _happening_step(steps, result.failing_action, float(found.group("time")), when,
                                              val_tolerance())
        result.unsatisfied = _condition(out, found.end())
        what = "invariant" if when == "invariant" else "precondition"
        result.message = f"step {result.failing_step} {result.failing_action}: {what} unsatisfied"
        if result.unsatisfied:
            result.message += f": {result.unsatisfied}"
    elif "Goal not satisfied" in out:
        result.unreached_goal = _condition(out, out.find("Goal not satisfied")) or "goal"
        result.message = f"the goal does not hold at the end of the plan: {result.unreached_goal}"
    return result


def _bad_operator(out: str, plan_text: str, common: dict) -> ValidationResult:
    """VAL's "Bad operator in plan!": a step names no action of the domain (or cannot be typed)."""
    name = _VAL_NO_ACTION.search(out)
    result = ValidationResult(ErrorCategory.PLAN_INVALID, "val", **common)
    for number, step in enumerate(_steps(plan_text), 1):
        if name is None or step.name == name.group("name").lower():
            result.failing_step, result.failing_action = number, "(" + " ".join((step.name, *step.args)) + ")"
            break
    what = f"the domain has no action '{name.group('name').lower()}'" if name else "a step names no action it can type"
    result.unsatisfied = what
    result.message = f"step {result.failing_step} {result.failing_action}: {what}"
    return result


def _bad_plan(plan_text: str, common: dict) -> ValidationResult:
    try:
        parse_plan(plan_text)
        line, message = 1, "VAL could not read the plan"
    except PlanParseError as exc:
        line, message = exc.line, str(exc)
    return ValidationResult(ErrorCategory.PARSE_ERROR_PLAN, "val", message=message, location=f"plan.txt:{line}",
                            **common)


def val_result(run: RunResult, plan_text: str) -> ValidationResult:
    """Read VAL's `Validate -v` report into the typed verdict Kairos' reader gives: "Plan valid";
    "(act)[ - start|end] has an unsatisfied precondition at time T" or "Invariant for (act) has
    its condition unsatisfied between time T to U", then repair advice "(Set (atom) to true|false)"
    or "(Satisfy derived predicate (atom)!)"; "Goal not satisfied" with the same advice; "Bad
    operator in plan!"; "Bad plan description!"; "Problem in domain definition!"; "FILE: line:
    N: Error: ..."."""
    out = run.output
    common = {"output_tail": out[-4000:], "wall_s": run.wall_s, "cpu_s": run.cpu_s}
    failed = tool_failure(run, "VAL")
    if failed is not None:
        return ValidationResult(failed[0], "val", message=failed[1], **common)
    if _VAL_VALID.search(out) and run.returncode == 0:
        return ValidationResult(ErrorCategory.OK, "val", valid=True, message="plan valid", **common)
    error = file_error(out)
    if error is not None:
        return ValidationResult(error[0], "val", message=error[2], location=error[1], **common)
    if "Problem in domain definition" in out:
        return ValidationResult(ErrorCategory.PARSE_ERROR_DOMAIN, "val", location="domain.pddl",
                                message="VAL could not read the domain", **common)
    if "Bad operator in plan" in out:
        return _bad_operator(out, plan_text, common)
    if "Bad plan description" in out:
        return _bad_plan(plan_text, common)
    if "Plan failed" not in out and "Goal not satisfied" not in out:
        return ValidationResult(ErrorCategory.SOLVER_CRASH, "val",
                                message=f"unrecognised VAL report (exit code {run.returncode}): {own_words(out)}",
                                **common)
    return _val_failure(out, plan_text, ValidationResult(ErrorCategory.PLAN_INVALID, "val", message="plan invalid",
                                                         **common))

"""Kairos (the `kairos-planner` wheel's CLI): temporal planning and plan validation.

Exit codes of `kairos solve`: 0 solved, 10 unsolvable (proved), 11 timeout, 12 memory,
13 unsupported, 14 no plan found, 2 invalid input, 1 internal error.
`kairos validate`: 0 valid, 1 invalid, 2 bad input.
Diagnostics read `FILE[:LINE[:COL]]: error: MESSAGE [family.code]`.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from solvers import locate
from solvers.limits import Limits
from solvers.plans import parse_plan_text
from solvers.results import ErrorCategory, PlanResult, ValidationResult
from solvers.sandbox import RunResult

DOMAIN, PROBLEM, PLAN = "domain.pddl", "problem.pddl", "plan.txt"
FILE_CATEGORY = {
    DOMAIN: ErrorCategory.PARSE_ERROR_DOMAIN,
    PROBLEM: ErrorCategory.PARSE_ERROR_PROBLEM,
    PLAN: ErrorCategory.PARSE_ERROR_PLAN,
}

_DIAG_RE = re.compile(
    r"^(?P<file>[^\s:]+)(?::(?P<line>\d+))?(?::(?P<col>\d+))?:\s+(?P<severity>error|warning|note):\s+"
    r"(?P<message>.*?)(?:\s+\[(?P<code>[a-z0-9_]+\.[a-z0-9_]+)\])?\s*$"
)
_STEP_RE = re.compile(r"step (?P<n>\d+) \((?P<action>[^()]*)\)")
# The condition that failed, at the end of a validate.* message: "...: (atom) is false|true".
_SIGNED_RE = re.compile(r": (?P<cond>\((?:[^()]|\([^()]*\))*\)) is (?P<value>false|true)$")
# Codes whose message ends with the failing condition (a precondition at start or end, an invariant).
_CONDITION_CODES = ("validate.precondition_failed", "validate.invariant_failed", "validate.constraint_violated")


def _signed_atom(message: str) -> str | None:
    """The failing condition with its sign: "(p a) is true" fails a "(not (p a))"."""
    found = _SIGNED_RE.search(message.strip())
    if found is None:
        return None
    cond = found.group("cond")
    return cond if found.group("value") == "false" else f"(not {cond})"

SOLVE_EXIT = {
    10: (ErrorCategory.UNSOLVABLE_PROVED, "Kairos proved the task unsolvable"),
    11: (ErrorCategory.SEARCH_TIMEOUT, "Kairos hit its time limit"),
    12: (ErrorCategory.MEMORY_LIMIT, "Kairos hit its memory limit"),
    13: (ErrorCategory.UNSUPPORTED_REQUIREMENT, "Kairos does not support a feature of this task"),
    14: (ErrorCategory.NO_PLAN_FOUND, "Kairos found no plan (and could not prove there is none)"),
}


@dataclass
class Diagnostic:
    file: str
    line: int | None
    col: int | None
    severity: str
    message: str
    code: str

    @property
    def location(self) -> str:
        parts = [self.file] + [str(x) for x in (self.line, self.col) if x is not None]
        return ":".join(parts)


def diagnostics(output: str) -> list[Diagnostic]:
    found = []
    for raw in output.splitlines():
        m = _DIAG_RE.match(raw.strip())
        if m:
            found.append(Diagnostic(
                m.group("file").rsplit("/", 1)[-1],
                int(m.group("line")) if m.group("line") else None,
                int(m.group("col")) if m.group("col") else None,
                m.group("severity"),
                m.group("message"),
                m.group("code") or "",
            ))
    return found


def binary() -> str:
    found = locate.kairos_binary()
    if found is None:
        raise FileNotFoundError("Kairos not found: pip install kairos-planner")
    return str(found)


def solve_argv(limits: Limits) -> list[str]:
    # Kairos' own limits sit a little inside the sandbox's, so it reports them (exit 11/12)
    # instead of being killed; --threads 1 keeps runs reproducible and the address space small.
    timeout = max(0.5, limits.timeout_s - 0.3)
    memory = max(32, int(limits.memory_mb * 0.8))
    return [binary(), "solve", DOMAIN, PROBLEM, "--no-anytime", "--threads", "1", "--timeout", f"{timeout:g}",
            "--memory", str(memory), "--output", PLAN]


def validate_argv() -> list[str]:
    return [binary(), "validate", DOMAIN, PROBLEM, PLAN]


def _errors(output: str) -> list[Diagnostic]:
    return [d for d in diagnostics(output) if d.severity == "error"]


def _input_category(errs: list[Diagnostic]) -> tuple[ErrorCategory, Diagnostic | None]:
    for d in errs:
        if d.code.startswith("unsupported.") or d.code in ("ground.unsupported", "validate.unsupported"):
            return ErrorCategory.UNSUPPORTED_REQUIREMENT, d
    for d in errs:
        if d.file in FILE_CATEGORY:
            return FILE_CATEGORY[d.file], d
    return ErrorCategory.INPUT_ERROR, errs[0] if errs else None


def _signal_category(run: RunResult) -> tuple[ErrorCategory, str] | None:
    if run.returncode is None:
        return (ErrorCategory.SEARCH_TIMEOUT if run.timed_out else ErrorCategory.SOLVER_CRASH), run.error
    if run.timed_out:
        return ErrorCategory.SEARCH_TIMEOUT, "wall-clock limit hit"
    if run.returncode < 0:
        sig = -run.returncode
        if sig == signal.SIGXCPU:
            return ErrorCategory.SEARCH_TIMEOUT, "CPU-time limit hit"
        if sig in (signal.SIGKILL, signal.SIGABRT, signal.SIGSEGV) and \
                re.search(r"bad_alloc|out of memory|memory", run.output[-4000:], re.I):
            return ErrorCategory.MEMORY_LIMIT, f"out of memory (signal {sig})"
        return ErrorCategory.SOLVER_CRASH, f"Kairos died on signal {signal.Signals(sig).name}"
    return None


def solve_result(run: RunResult, planner: str = "kairos") -> PlanResult:
    tail = run.output[-4000:]
    common = {"output_tail": tail, "wall_s": run.wall_s, "cpu_s": run.cpu_s}
    codes = [d.code for d in diagnostics(run.output) if d.code]
    bad = _signal_category(run)
    if bad:
        return PlanResult(bad[0], planner, message=bad[1], diagnostics=codes, **common)
    code = run.returncode
    if code == 0 and PLAN in run.files:
        try:
            steps, cost = parse_plan_text(run.files[PLAN].decode("utf-8", "replace"))
        except ValueError as exc:
            return PlanResult(ErrorCategory.SOLVER_CRASH, planner, message=f"unreadable plan: {exc}",
                              diagnostics=codes, **common)
        return PlanResult(ErrorCategory.OK, planner, steps, cost if cost is not None else float(len(steps)),
                          diagnostics=codes, **common)
    if code in SOLVE_EXIT:
        category, message = SOLVE_EXIT[code]
        return PlanResult(category, planner, message=message, diagnostics=codes, **common)
    if code == 2:
        category, diag = _input_category(_errors(run.output))
        message = f"{diag.location}: {diag.message}" if diag else "Kairos rejected its input"
        return PlanResult(category, planner, message=message, diagnostics=codes, **common)
    return PlanResult(ErrorCategory.SOLVER_CRASH, planner, message=f"Kairos exit code {code}", diagnostics=codes,
                      **common)


def step_at_line(plan_text: str, line: int) -> int | None:
    """The 1-based number, in the plan's own order, of the step written on `line` (Kairos numbers
    steps after sorting them by time; VAL's reader and the strict check count lines)."""
    lines = plan_text.splitlines()
    if not 1 <= line <= len(lines) or not lines[line - 1].split(";", 1)[0].strip():
        return None
    return sum(1 for text in lines[:line] if text.split(";", 1)[0].strip())


def validation_result(run: RunResult, validator: str = "kairos", plan_text: str | None = None) -> ValidationResult:
    tail = run.output[-4000:]
    errs = _errors(run.output)
    codes = [d.code for d in diagnostics(run.output) if d.code]
    common = {"output_tail": tail, "wall_s": run.wall_s, "cpu_s": run.cpu_s, "diagnostics": codes}
    bad = _signal_category(run)
    if bad:
        return ValidationResult(bad[0], validator, message=bad[1], **common)
    if run.returncode == 0:
        return ValidationResult(ErrorCategory.OK, validator, valid=True, message="plan valid", **common)
    if run.returncode == 2 or not any(d.code.startswith("validate.") for d in errs):
        category, diag = _input_category(errs)
        if diag is None:
            category = ErrorCategory.SOLVER_CRASH if run.returncode not in (1, 2) else ErrorCategory.INPUT_ERROR
            return ValidationResult(category, validator, message=f"validator exit code {run.returncode}", **common)
        return ValidationResult(category, validator, location=diag.location, message=diag.message, **common)
    diag = next(d for d in errs if d.code.startswith("validate."))
    if diag.code == "validate.unsupported":
        return ValidationResult(ErrorCategory.UNSUPPORTED_REQUIREMENT, validator, message=diag.message,
                                location=diag.location, **common)
    result = ValidationResult(ErrorCategory.PLAN_INVALID, validator, message=diag.message,
                              location=diag.location, **common)
    step = _STEP_RE.search(diag.message)
    if step:
        result.failing_step = int(step.group("n"))
        result.failing_action = "(" + step.group("action").strip() + ")"
        if plan_text is not None and diag.file == PLAN and diag.line:
            result.failing_step = step_at_line(plan_text, diag.line) or result.failing_step
    if diag.code == "validate.goal_not_reached":
        result.unreached_goal = _signed_atom(diag.message) or diag.message
    elif diag.code == "validate.duration_mismatch":
        result.unsatisfied = "?duration"
    elif diag.code in _CONDITION_CODES:
        result.unsatisfied = _signed_atom(diag.message) or diag.message.split(": ", 1)[-1]
    else:
        # Unknown action or object, wrong arity, a type mismatch: the step cannot apply.
        result.unsatisfied = diag.message.split(": ", 1)[-1]
    return result

"""Public entry points of `solvers/`: plan and validate PDDL given as text.

Everything above `solvers/` calls only these functions (plus the result types). Every call
runs in the sandbox (see solvers/sandbox.py) through a pre-started worker (solvers/pool.py);
no exception escapes for anything the PDDL says: bad input comes back as a categorized result.
Only a bad *argument* (an unknown planner or alias, a non-string text) raises ValueError/TypeError.
Which program plans or validates is looked up in solvers.planners.PLANNERS.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Literal, TypeVar

from solvers import cache, pddl_check
from solvers.limits import Limits
from solvers.planners import PLANNERS, Planner, RunRequest, planning_names
from solvers.plans import PlanParseError, parse_plan
from solvers.pool import WorkerPool, get_pool
from solvers.results import ErrorCategory, PlanResult, ValidationResult
from solvers.sandbox import RunResult

# "fd", "temporal" (the temporal planner in force) or any other registered planner's name.
PlannerName = Literal["fd", "temporal"] | str
R = TypeVar("R", PlanResult, ValidationResult)

__all__ = ["Limits", "PlannerName", "parse_plan", "plan", "temporal_planner", "validate", "validator_name"]


def _check_text(**texts: object) -> None:
    for name, value in texts.items():
        if not isinstance(value, str):
            raise TypeError(f"{name} must be str, got {type(value).__name__}")


def _blank(text: str) -> bool:
    """Nothing but whitespace and ;-comments (the FD translator crashes on such a file)."""
    return not any(line.split(";", 1)[0].strip() for line in text.splitlines())


def _blank_input(domain: str, problem: str, planner: str) -> PlanResult | None:
    for name, text, category in (("domain.pddl", domain, ErrorCategory.PARSE_ERROR_DOMAIN),
                                 ("problem.pddl", problem, ErrorCategory.PARSE_ERROR_PROBLEM)):
        if _blank(text):
            return PlanResult(category, planner, message=f"{name}:1:1: the file is empty")
    return None


MAX_MESSAGE = 2_000  # characters of a result's message (the output tail holds the rest)
MAX_TAIL = 4_000
MAX_DIAGNOSTICS = 50
MAX_PLAN_LINE = 100_000


def _cap(text: str, limit: int, *, keep_end: bool = False) -> str:
    if len(text) <= limit:
        return text
    return "[...] " + text[-(limit - 6):] if keep_end else text[: limit - 6] + " [...]"


def _capped(result: R) -> R:
    result.message = _cap(result.message, MAX_MESSAGE)
    result.output_tail = _cap(result.output_tail, MAX_TAIL, keep_end=True)
    result.diagnostics = [_cap(d, 200) for d in result.diagnostics[:MAX_DIAGNOSTICS]]
    for name in ("failing_action", "unsatisfied", "unreached_goal", "location"):
        value = getattr(result, name, None)
        if isinstance(value, str):
            setattr(result, name, _cap(value, MAX_MESSAGE))
    return result


def _check_deadline(t0: float, limits: Limits) -> float:
    """The check may use 80% of the limit: freeing a huge half-parsed task takes a while too, and a
    task the check cannot read in that time the translator cannot plan in the rest."""
    return t0 + 0.8 * limits.timeout_s


def _overlong_plan_line(text: str) -> int | None:
    if len(text) <= MAX_PLAN_LINE:
        return None
    for number, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_PLAN_LINE:
            return number
    return None


def temporal_planner() -> str:
    """"popf" when a POPF binary is on PATH, else "kairos" (HALO_TEMPORAL_PLANNER=kairos forces it)."""
    if os.environ.get("HALO_TEMPORAL_PLANNER", "").lower() == "kairos":
        return "kairos"
    return "popf" if PLANNERS.get("popf").available() else "kairos"


def validator_name() -> str:
    """"val" when VAL's Validate is on PATH, else "kairos" (HALO_VALIDATOR=kairos forces it)."""
    if os.environ.get("HALO_VALIDATOR", "").lower() == "kairos":
        return "kairos"
    return "val" if PLANNERS.get("val").available() else "kairos"


def _planner_for(planner: str) -> str:
    """The registry name of the program a `planner` argument picks (ValueError if none)."""
    if planner == "fd":  # the common case, without walking the registry
        return planner
    if planner == "temporal":
        return temporal_planner()
    names = planning_names()
    if planner not in names:
        raise ValueError(f"planner must be one of {', '.join(map(repr, names))}, got {planner!r}")
    tool = PLANNERS.get(planner)
    if not tool.available():
        raise ValueError(f"planner {planner!r} is not installed here ({tool.install or 'no install hint'})")
    return planner


def plan(domain: str, problem: str, *, planner: PlannerName = "fd", search: str | None = None,
         alias: str = "lama-first", limits: Limits = Limits(), sandbox: str | None = None) -> PlanResult:
    """Plan with Fast Downward ("fd": `alias` such as "lama-first" or "seq-opt-lmcut", or a raw
    `search` string such as "astar(lmcut())"), the temporal planner ("temporal": POPF if
    installed, else Kairos; Kairos also answers where POPF crashes) or any other registered
    planner by name ("popf" is POPF alone). `sandbox` picks a level other than the one in force
    (benchmarks)."""
    _check_text(domain=domain, problem=problem)
    if not isinstance(planner, str):
        raise ValueError(f"planner must be a planner's name, got {planner!r}")
    name = _planner_for(planner)
    result = _plan_with(domain, problem, name, search, alias, limits, sandbox)
    if planner == "temporal" and name != "kairos" and result.category is ErrorCategory.SOLVER_CRASH:
        return _after_crash(result, _plan_with(domain, problem, "kairos", search, alias, limits, sandbox))
    return result


def _after_crash(crashed: PlanResult, fallback: PlanResult) -> PlanResult:
    """"temporal" asks for a temporal planner, not for POPF: where POPF dies on an input (it
    segfaults on some solvable tasks), Kairos's answer is the call's, with the crash named and
    both runs' time counted."""
    note = f"{crashed.planner} died ({_cap(crashed.message, 300)}); {fallback.planner} answered"
    return replace(fallback, message=_cap(f"{note}: {fallback.message}" if fallback.message else note, MAX_MESSAGE),
                   wall_s=crashed.wall_s + fallback.wall_s, cpu_s=crashed.cpu_s + fallback.cpu_s)


def _plan_with(domain: str, problem: str, name: str, search: str | None, alias: str, limits: Limits,
               sandbox: str | None) -> PlanResult:
    """One planner's answer, through the result cache where one is configured."""
    t0 = time.monotonic()
    store = cache.current()
    if store is None:
        return _plan(domain, problem, name, search, alias, limits, sandbox, t0)
    config = PLANNERS.get(name).config(alias, search)  # ValueError: unknown alias
    key = store.key("plan", name, _planner_version(name), config, domain, problem)
    return _through_cache(store, key, t0, lambda: _plan(domain, problem, name, search, alias, limits, sandbox, t0))


@functools.lru_cache(maxsize=8)
def _planner_version(name: str) -> str:
    """What a cached answer depends on besides the texts and the configuration."""
    return f"{name} {PLANNERS.get(name).cache_id()} {pddl_check.VERSION}"


class _CheckFailed(Exception):
    """The strict check, run in the sandbox with the call's first request, found an error, ran
    out of time (error None) or broke (`broke`: its message; the gate then refuses to judge)."""

    def __init__(self, error: pddl_check.CheckError | None, cpu_s: float = 0.0, broke: str = ""):
        self.error = error
        self.cpu_s = cpu_s  # the sandboxed worker's CPU for the check
        self.broke = broke


_PAIR_NAMES = ("domain.pddl", "problem.pddl")


def _read_verdict(verdict: dict, texts: tuple[str, str], cpu_s: float) -> None:
    """Act on the worker's check verdict: remember what it says of the pair, raise _CheckFailed."""
    if verdict.get("failed"):
        pddl_check.note_failure(str(verdict["failed"]))
        raise _CheckFailed(None, cpu_s, broke=str(verdict["failed"]))
    if verdict.get("timed_out"):
        raise _CheckFailed(None, cpu_s)
    error = pddl_check.CheckError.from_dict(verdict["error"]) if verdict.get("error") else None
    # A plan-step error says the pair itself passed.
    pddl_check.remember(*texts, None if error is None or error.file == pddl_check.PLAN_FILE else error)
    if error is not None:
        raise _CheckFailed(error, cpu_s)


def _runner(pool: WorkerPool, files: dict[str, str | bytes], limits: Limits, deadline: float,
            check: tuple[str, str] | None = None, plan_steps: bool = False) -> tuple[RunRequest, list[RunResult]]:
    """A planner's way into the sandbox for this call, and the runs it made (for their level).

    With `check` (the pair's texts), the strict check runs in the sandboxed worker before the
    first request's program (for a validation, `plan_steps`: the plan's steps too): hostile PDDL
    is parsed under the sandbox, and its CPU counts as the call's solver time. The verdict on the
    pair is remembered here, so the validation after a plan does not check the pair again."""
    runs: list[RunResult] = []
    unchecked = check

    def run(request: dict, collect: tuple[str, ...] = ()) -> RunResult:
        nonlocal unchecked
        texts = unchecked
        names = (*_PAIR_NAMES, "plan.txt") if plan_steps else _PAIR_NAMES
        result = pool.request(request, files=files, limits=limits, collect=collect, deadline=deadline,
                              check=names if texts else None)
        if texts and result.static_check:  # else the worker failed before judging: ask again next time
            unchecked = None
            _read_verdict(result.static_check, texts, result.cpu_s)
        runs.append(result)
        return result

    return run, runs


def _check_here(domain: str, problem: str, t0: float, limits: Limits) -> None:
    """The check in this process, for a call that ran nothing in the sandbox. Raises _CheckFailed."""
    try:
        error = pddl_check.check(domain, problem, _check_deadline(t0, limits))
    except pddl_check.CheckTimeout:
        raise _CheckFailed(None) from None
    except pddl_check.CheckFailed as exc:
        raise _CheckFailed(None, broke=str(exc)) from None
    if error is not None:
        raise _CheckFailed(error)


def _checked(call: Callable[[RunRequest], R], pool: WorkerPool, files: dict[str, str | bytes], limits: Limits,
             t0: float, domain: str, problem: str, failed: Callable[[_CheckFailed], R]) -> R:
    """Run a planner or validator behind the strict check: "a plan is never valid, and no plan is
    made, on PDDL that is not well-formed", whichever program would run. A validation's plan
    steps are checked on every call (the pair's verdict may be known, the plan is new)."""
    known, error = pddl_check.recall(domain, problem)
    plan_steps = "plan.txt" in files
    try:
        if error is not None:
            raise _CheckFailed(error)
        check = None if known and not plan_steps else (domain, problem)
        run, runs = _runner(pool, files, limits, t0 + limits.timeout_s, check, plan_steps)
        result = call(run)
        if not runs and not known:  # the program answered without running: its answer must not hide an error
            _check_here(domain, problem, t0, limits)
    except _CheckFailed as exc:
        return failed(exc)
    return _finish(result, runs, t0)


def _through_cache(store: cache.ResultCache, key: str, t0: float, compute: Callable[[], R]) -> R:
    """`compute()`'s answer through the result cache; a hit's wall time is this call's own."""
    result, hit = store.compute_once(key, compute)
    if hit:
        result.wall_s = time.monotonic() - t0
    return result


def _finish(result: R, runs: list[RunResult], t0: float) -> R:
    if not runs:  # the planner answered without running anything (a task it cannot take)
        result.wall_s = time.monotonic() - t0
        return result
    result.sandbox = runs[-1].level
    result.wall_s = time.monotonic() - t0  # the whole call: check, staging, translation and search
    return _capped(result)


# Programs that cannot be trusted with parentheses that do not balance: VAL names no place in
# such a syntax error and crashes on a problem's; POPF dies on SIGSEGV. Kairos and Fast Downward
# say where themselves (and their words are what the refinement loop has always observed).
_NEEDS_BALANCED = frozenset({"val", "popf"})


def _unbalanced_for(name: str, domain: str, problem: str) -> pddl_check.CheckError | None:
    if name not in _NEEDS_BALANCED:
        return None
    for file, text in (("domain.pddl", domain), ("problem.pddl", problem)):
        error = pddl_check.unbalanced(text, file)
        if error is not None:
            return error
    return None


def _plan(domain: str, problem: str, name: str, search: str | None, alias: str, limits: Limits,
          sandbox: str | None, t0: float) -> PlanResult:
    blank = _blank_input(domain, problem, name)
    if blank is not None:
        return blank
    tool: Planner = PLANNERS.get(name)

    def failed(exc: _CheckFailed) -> PlanResult:
        if exc.broke:
            return PlanResult(ErrorCategory.CHECK_FAILED, name, message=exc.broke, wall_s=time.monotonic() - t0,
                              cpu_s=exc.cpu_s)
        if exc.error is None:
            return PlanResult(ErrorCategory.SEARCH_TIMEOUT, name, message="wall-clock limit hit in the static check",
                              wall_s=time.monotonic() - t0, cpu_s=exc.cpu_s)
        return PlanResult(exc.error.category, name, message=str(exc.error), diagnostics=[exc.error.code],
                          output_tail=exc.error.diagnostic, wall_s=time.monotonic() - t0, cpu_s=exc.cpu_s)

    def call(run: RunRequest) -> PlanResult:
        error = _unbalanced_for(name, domain, problem)
        if error is not None:
            return failed(_CheckFailed(error))
        return tool.plan(domain, problem, alias=alias, search=search, limits=limits, run=run)

    return _checked(call,
                    get_pool(sandbox), {"domain.pddl": domain, "problem.pddl": problem}, limits, t0,
                    domain, problem, failed)


def validate(domain: str, problem: str, plan_text: str, *, limits: Limits = Limits(),
             sandbox: str | None = None, validator: str | None = None) -> ValidationResult:
    """Check a plan (VAL when installed, else Kairos; `validator` names a registered one). The
    verdict is typed: valid; invalid with the failing step and the unsatisfied precondition or
    the unreached goal; a parse error with its file:line:col; an unsupported feature."""
    _check_text(domain=domain, problem=problem, plan_text=plan_text)
    name = _validator_for(validator)
    t0 = time.monotonic()
    store = cache.current()
    if store is None:
        return _validate(domain, problem, plan_text, limits, sandbox, t0, name)
    key = store.key("validate", name, _planner_version(name), domain, problem, plan_text)
    return _through_cache(store, key, t0, lambda: _validate(domain, problem, plan_text, limits, sandbox, t0, name))


def _validator_for(validator: str | None) -> str:
    if validator is None:
        return validator_name()
    if validator not in PLANNERS or "validator" not in PLANNERS.get(validator).roles:
        raise ValueError(f"validator must be a registered validator's name, got {validator!r}")
    if not PLANNERS.get(validator).available():
        raise ValueError(f"validator {validator!r} is not installed here")
    return validator


def _unreadable_plan(plan_text: str) -> tuple[str, str] | None:
    """(location, message) of the first plan line that is not a plan step, None when all are."""
    try:
        parse_plan(plan_text)
    except PlanParseError as exc:
        line = exc.line
        raw = (plan_text.splitlines() or [""])[line - 1].split(";", 1)[0].rstrip()
        # An unclosed step is wrong where it ends; any other line where it starts.
        col = len(raw) + 1 if raw.count("(") > raw.count(")") else len(raw) - len(raw.lstrip()) + 1
        return f"plan.txt:{line}:{col}", str(exc)
    return None


def _check_verdict(error: pddl_check.CheckError, name: str, wall_s: float, cpu_s: float) -> ValidationResult:
    """The strict check's refusal as a verdict: a parse error with its place, or a plan step that
    cannot apply (plan_invalid with the step, as a validator reports it)."""
    result = ValidationResult(error.category, name, location=error.location, message=error.message,
                              diagnostics=[error.code], output_tail=error.diagnostic, wall_s=wall_s, cpu_s=cpu_s)
    if error.step:
        result.failing_step, result.failing_action = error.step, error.action
        result.unsatisfied = error.message.split(": ", 1)[-1]
    return result


def _validate(domain: str, problem: str, plan_text: str, limits: Limits, sandbox: str | None,
              t0: float, name: str) -> ValidationResult:
    long_line = _overlong_plan_line(plan_text)
    blank = _blank_input(domain, problem, name)
    if blank is not None:
        return ValidationResult(blank.category, name, location=blank.message.split(": ", 1)[0],
                                message=blank.message, wall_s=time.monotonic() - t0)

    def failed(exc: _CheckFailed) -> ValidationResult:
        if exc.broke:
            return ValidationResult(ErrorCategory.CHECK_FAILED, name, message=exc.broke, wall_s=time.monotonic() - t0,
                                    cpu_s=exc.cpu_s)
        if exc.error is None:
            return ValidationResult(ErrorCategory.SEARCH_TIMEOUT, name, wall_s=time.monotonic() - t0,
                                    message="wall-clock limit hit in the static check", cpu_s=exc.cpu_s)
        return _check_verdict(exc.error, name, time.monotonic() - t0, exc.cpu_s)

    def call(run: RunRequest) -> ValidationResult:
        if long_line is not None:
            return ValidationResult(ErrorCategory.PARSE_ERROR_PLAN, name, location=f"plan.txt:{long_line}:1",
                                    message=f"plan line {long_line} is over {MAX_PLAN_LINE:,} characters: not a plan "
                                            "step", wall_s=time.monotonic() - t0)
        error = _unbalanced_for(name, domain, problem)
        if error is not None:
            return _check_verdict(error, name, time.monotonic() - t0, 0.0)
        unreadable = _unreadable_plan(plan_text) if name == "val" else None
        if unreadable is not None:  # VAL reads such a line as no step at all (Kairos says where it cannot read)
            return ValidationResult(ErrorCategory.PARSE_ERROR_PLAN, name, location=unreadable[0],
                                    message=unreadable[1], wall_s=time.monotonic() - t0)
        return PLANNERS.get(name).validate(plan_text, limits=limits, run=run)

    files: dict[str, str | bytes] = {"domain.pddl": domain, "problem.pddl": problem, "plan.txt": plan_text}
    return _checked(call, get_pool(sandbox), files, limits, t0, domain, problem, failed)

"""Typed results of planner and validator calls, with stable error categories.

The category strings are part of the trajectory schema and of the HTTP API: never rename one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from solvers.errors import INFRA_REASON_LIMIT, InfraError


class ErrorCategory(StrEnum):
    OK = "ok"
    PARSE_ERROR_DOMAIN = "parse_error_domain"
    PARSE_ERROR_PROBLEM = "parse_error_problem"
    PARSE_ERROR_PLAN = "parse_error_plan"
    UNSUPPORTED_REQUIREMENT = "unsupported_requirement"
    UNSOLVABLE_PROVED = "unsolvable_proved"
    NO_PLAN_FOUND = "no_plan_found"
    SEARCH_TIMEOUT = "search_timeout"
    MEMORY_LIMIT = "memory_limit"
    SOLVER_CRASH = "solver_crash"
    PLAN_INVALID = "plan_invalid"
    INPUT_ERROR = "input_error"
    # The strict check itself failed (a bug in it, not in the task): the gate refused to judge.
    CHECK_FAILED = "check_failed"

    @property
    def is_parse_error(self) -> bool:
        return self in PARSE_ERRORS

    @property
    def is_tool_failure(self) -> bool:
        """The tool, not the task, failed: a program that could not start or died, an output no
        reader understands, the strict check's own failure. Such an answer says nothing about the
        task and must never be recorded as the task's outcome (see TOOL_FAILURE_CATEGORIES)."""
        return self in TOOL_FAILURE_CATEGORIES


PARSE_ERRORS = frozenset(
    {ErrorCategory.PARSE_ERROR_DOMAIN, ErrorCategory.PARSE_ERROR_PROBLEM, ErrorCategory.PARSE_ERROR_PLAN}
)


# Tool failures vs task failures: every other category is an answer about the task (its PDDL
# does not parse, it has no plan in the limits, the plan is invalid ...).
TOOL_FAILURE_CATEGORIES = frozenset({ErrorCategory.SOLVER_CRASH, ErrorCategory.CHECK_FAILED})


class ToolFailure(InfraError, RuntimeError):
    """A planner, validator or the code around them failed, not the task: raised where a caller
    would otherwise have to record the failure as the task's outcome."""

    def __init__(self, category: ErrorCategory, message: str) -> None:
        super().__init__(f"{category.value}: {message}", kind=f"solver:{category.value}")
        self.category = category
        self.message = message

    def infra_reason(self) -> str:
        return f"{self.kind}: {self.message}"[:INFRA_REASON_LIMIT]


def format_number(value: float, places: int) -> str:
    """`value` with `places` decimals when that is exact, else every digit it has (never an
    exponent: VAL cannot read one, and a rounded duration is another plan)."""
    short = f"{value:.{places}f}" if places else f"{value:g}"
    if float(short) == value and "e" not in short:
        return short
    text = repr(float(value))
    if "e" in text or "E" in text:
        text = f"{value:.20f}".rstrip("0").rstrip(".")
    return text


@dataclass(frozen=True)
class PlanStep:
    """One plan step. Temporal plans carry a start time and a duration."""

    name: str
    args: tuple[str, ...] = ()
    start: float | None = None
    duration: float | None = None

    def to_pddl(self) -> str:
        body = "(" + " ".join((self.name, *self.args)) + ")"
        if self.start is None:
            return body
        dur = f" [{format_number(self.duration, 0)}]" if self.duration is not None else ""
        return f"{format_number(self.start, 3)}: {body}{dur}"


def plan_to_text(steps: list[PlanStep] | tuple[PlanStep, ...]) -> str:
    return "".join(step.to_pddl() + "\n" for step in steps)


@dataclass
class PlanResult:
    """What a planner call produced. `plan` is None unless category is OK."""

    category: ErrorCategory
    planner: str
    plan: list[PlanStep] | None = None
    cost: float | None = None
    message: str = ""
    output_tail: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    diagnostics: list[str] = field(default_factory=list)
    sandbox: str = ""  # the sandbox level the call ran under: "bwrap" or "rlimits"

    @property
    def ok(self) -> bool:
        return self.category is ErrorCategory.OK

    @property
    def plan_text(self) -> str:
        return plan_to_text(self.plan or [])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["category"] = self.category.value
        return data


@dataclass
class ValidationResult:
    """A validator verdict.

    valid: the plan is executable and reaches the goal (category OK).
    invalid: category PLAN_INVALID with failing_step (1-based) and the unsatisfied precondition,
      or unreached_goal when every step applies but the goal does not hold.
    parse error: category PARSE_ERROR_* with location "file:line:col".
    unsupported: category UNSUPPORTED_REQUIREMENT.
    """

    category: ErrorCategory
    validator: str
    valid: bool = False
    failing_step: int | None = None
    failing_action: str | None = None
    unsatisfied: str | None = None
    unreached_goal: str | None = None
    location: str | None = None
    message: str = ""
    output_tail: str = ""
    wall_s: float = 0.0
    diagnostics: list[str] = field(default_factory=list)
    sandbox: str = ""
    cpu_s: float = 0.0  # CPU seconds of the solver processes for the call (see RunResult.cpu_s)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["category"] = self.category.value
        return data

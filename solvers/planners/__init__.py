"""The `Planner` protocol and the one registry of planners and validators.

A planner (or validator) is one object that says whether it is installed, its version, the
files the sandbox must bind read-only, and how to turn a task into a sandboxed request and the
run into a typed result. `solvers.plan`/`solvers.validate`, `solvers.versions()` (hence
`halo doctor` and trajectory records), the sandbox's read-only binds and `halo solve
--planner` all iterate PLANNERS; adding a planner is one module with such an object plus one
`PLANNERS.register(name, "module:attr")` line (here, or in the code that adds it). The
built-in ones are the modules of this package; they import their planner's code when they
plan, so asking every planner for its paths before a worker starts stays cheap.

Roles: "classical" (plans STRIPS/ADL tasks), "temporal" (plans durative actions), "validator"
(checks a plan). `halo solve --planner NAME` accepts every entry with a planning role.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from solvers.registry import Registry

if TYPE_CHECKING:
    from solvers.limits import Limits
    from solvers.results import PlanResult, ValidationResult
    from solvers.sandbox import RunResult

# Runs one request in the call's sandbox: (request, files to collect) -> what the command did.
RunRequest = Callable[[dict, tuple[str, ...]], "RunResult"]
PLANNING_ROLES = frozenset({"classical", "temporal"})


class Planner(Protocol):
    name: str  # the registry name, also the `planner`/`validator` field of its results
    label: str  # its key in solvers.versions() and `halo doctor`
    roles: frozenset[str]
    required: bool  # `halo doctor` fails without it
    install: str  # how to get it, shown by `halo doctor` when it is missing

    def available(self) -> bool: ...

    def version(self) -> str | None:
        """What `halo doctor` and trajectory records show; None when not installed."""

    def cache_id(self) -> str:
        """What a cached answer depends on besides the texts and the configuration."""

    def ro_paths(self) -> list[Path]:
        """Files or folders outside /usr the sandbox binds read-only for it (none if absent)."""

    def config(self, alias: str, search: str | None) -> str:
        """The configuration part of a cache key (ValueError for a configuration it refuses)."""

    def plan(self, domain: str, problem: str, *, alias: str, search: str | None, limits: Limits,
             run: RunRequest) -> PlanResult: ...

    def validate(self, plan_text: str, *, limits: Limits, run: RunRequest) -> ValidationResult: ...


class BasePlanner:
    """Defaults for the optional parts: no configuration, and a planner that validates nothing
    (or a validator that plans nothing) says so with a ValueError."""

    name: ClassVar[str]
    label: ClassVar[str]
    roles: ClassVar[frozenset[str]]
    required: ClassVar[bool] = False
    install: ClassVar[str] = ""

    def config(self, alias: str, search: str | None) -> str:  # noqa: ARG002
        return ""

    def plan(self, domain: str, problem: str, *, alias: str, search: str | None, limits: Limits,
             run: RunRequest) -> PlanResult:
        raise ValueError(f"{self.name} is not a planner")

    def validate(self, plan_text: str, *, limits: Limits, run: RunRequest) -> ValidationResult:
        raise ValueError(f"{self.name} is not a validator")


PLANNERS: Registry[Planner] = Registry("planner")
PLANNERS.register("fd", "solvers.planners.fd:PLANNER")
PLANNERS.register("kairos", "solvers.planners.kairos:PLANNER")
PLANNERS.register("popf", "solvers.planners.popf:PLANNER")
PLANNERS.register("val", "solvers.planners.val:PLANNER")


def planners() -> list[Planner]:
    """Every registered planner and validator, in name order."""
    return [PLANNERS.get(name) for name in PLANNERS.names()]


def planning_names() -> list[str]:
    """What `solvers.plan(planner=...)` and `halo solve --planner` accept: "fd", "temporal" (the
    temporal planner in force) and every other entry with a planning role."""
    names = ["fd", "temporal"]
    for name in PLANNERS.names():
        if name not in names and PLANNERS.get(name).roles & PLANNING_ROLES:
            names.append(name)
    return names

"""Sandboxed planners and validators. Imports no other part of HALO."""

from solvers import cache
from solvers.api import Limits, parse_plan, plan, temporal_planner, validate, validator_name
from solvers.pool import shutdown
from solvers.results import ErrorCategory, PlanResult, PlanStep, ValidationResult, plan_to_text
from solvers.sandbox import sandbox_level


def __getattr__(name: str) -> object:
    # versions() needs importlib.metadata and subprocesses: loaded on first use, so a one-shot
    # `halo solve` does not pay for it.
    if name == "versions":
        from solvers.versions import versions

        globals()["versions"] = versions
        return versions
    raise AttributeError(f"module 'solvers' has no attribute {name!r}")


cache_stats = cache.stats
configure_cache = cache.configure

__all__ = [
    "cache_stats",
    "configure_cache",
    "ErrorCategory",
    "Limits",
    "PlanResult",
    "PlanStep",
    "ValidationResult",
    "parse_plan",
    "plan",
    "plan_to_text",
    "sandbox_level",
    "shutdown",
    "temporal_planner",
    "validate",
    "validator_name",
    "versions",
]

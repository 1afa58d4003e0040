"""Sandboxed planners and validators. Imports no other part of HALO."""

from solvers.api import Limits, parse_plan, plan, temporal_planner, validate, validator_name
from solvers.pool import shutdown
from solvers.results import ErrorCategory, PlanResult, PlanStep, ValidationResult, plan_to_text
from solvers.sandbox import sandbox_level
from solvers.versions import versions

__all__ = [
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

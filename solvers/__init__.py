"""Sandboxed planners and validators. Imports no other part of HALO."""

from solvers.api import Limits, parse_plan, plan, validate
from solvers.results import ErrorCategory, PlanResult, PlanStep, ValidationResult, plan_to_text

__all__ = [
    "ErrorCategory",
    "Limits",
    "PlanResult",
    "PlanStep",
    "ValidationResult",
    "parse_plan",
    "plan",
    "plan_to_text",
    "validate",
]

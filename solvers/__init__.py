"""Sandboxed planners and validators. Imports no other part of HALO.

The names below load their modules on first use (PEP 562), so `import solvers.pool` alone, as
a one-shot `halo solve` does to start its worker early, does not pay for the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Limits": "solvers.api", "parse_plan": "solvers.api", "plan": "solvers.api",
    "temporal_planner": "solvers.api", "validate": "solvers.api", "validator_name": "solvers.api",
    "shutdown": "solvers.pool",
    "ErrorCategory": "solvers.results", "PlanResult": "solvers.results", "PlanStep": "solvers.results",
    "ValidationResult": "solvers.results", "plan_to_text": "solvers.results",
    "ToolFailure": "solvers.results", "TOOL_FAILURE_CATEGORIES": "solvers.results",
    "HaloError": "solvers.errors", "InputError": "solvers.errors", "InfraError": "solvers.errors",
    "BusyError": "solvers.errors",
    "check_failures": ("solvers.pddl_check", "failures"),
    "sandbox_level": "solvers.sandbox",
    "versions": "solvers.versions",
    "cache_stats": ("solvers.cache", "stats"), "configure_cache": ("solvers.cache", "configure"),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'solvers' has no attribute {name!r}")
    module, attr = where if isinstance(where, tuple) else (where, name)
    value = getattr(importlib.import_module(module), attr)
    # Set after the import: importing solvers.versions binds the submodule to this name first.
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})

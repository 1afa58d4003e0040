"""Fast Downward (up-fast-downward wheel) as a registered planner: the classical planner.

Cheap to import (the sandbox's read-only binds ask every planner for its paths before a worker
starts); the request and result code in solvers.fd loads when it plans.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from solvers import locate
from solvers.planners import BasePlanner, RunRequest

if TYPE_CHECKING:
    from solvers.limits import Limits
    from solvers.results import PlanResult


class FastDownward(BasePlanner):
    name = "fd"
    label = "fast-downward"
    roles = frozenset({"classical"})
    required = True
    install = "pip install up-fast-downward==1.0.0"

    def available(self) -> bool:
        return locate.fd_root() is not None

    def version(self) -> str | None:
        if locate.fd_root() is None:
            return None
        return f"{locate.fd_version()} (up-fast-downward {locate.dist_version('up-fast-downward')})"

    def cache_id(self) -> str:
        return f"{locate.dist_version('up-fast-downward') or ''} {locate.fd_search_binary()}"

    def ro_paths(self) -> list[Path]:
        root = locate.fd_root()
        return [root] if root is not None else []

    def config(self, alias: str, search: str | None) -> str:
        import json

        from solvers import fd

        return json.dumps(fd.search_args(alias, search))  # ValueError: unknown alias

    def plan(self, domain: str, problem: str, *, alias: str, search: str | None, limits: Limits,
             run: RunRequest) -> PlanResult:
        from solvers import fd
        from solvers.results import ErrorCategory, PlanResult

        if fd.is_temporal(domain):
            return PlanResult(ErrorCategory.UNSUPPORTED_REQUIREMENT, self.name,
                              message="durative actions need planner='temporal'")
        request = fd.request(alias, search)  # ValueError for an unknown alias
        return fd.to_result(run(request, ("sas_plan",)), self.name)


PLANNER = FastDownward()

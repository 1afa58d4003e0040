"""A throw-away planner for tests/extensions: the whole of what adding a planner takes is this
file plus one `PLANNERS.register(name, "module:attr")` line.

Fast Downward with blind A* search (optimal, no heuristic), run in the sandbox like any planner.
"""

from __future__ import annotations

from pathlib import Path

from solvers import fd, locate
from solvers.limits import Limits
from solvers.planners import BasePlanner, RunRequest
from solvers.results import PlanResult

SEARCH = "astar(blind())"


class BlindSearch(BasePlanner):
    name = "fd-blind"
    label = "fd-blind"
    roles = frozenset({"classical"})
    install = "pip install up-fast-downward==1.0.0"

    def available(self) -> bool:
        return locate.fd_root() is not None

    def version(self) -> str | None:
        return f"{locate.fd_version()} {SEARCH}" if self.available() else None

    def cache_id(self) -> str:
        return f"{locate.fd_search_binary()} {SEARCH}"

    def ro_paths(self) -> list[Path]:
        root = locate.fd_root()
        return [root] if root is not None else []

    def plan(self, domain: str, problem: str, *, alias: str, search: str | None, limits: Limits,
             run: RunRequest) -> PlanResult:
        return fd.to_result(run(fd.request(alias, SEARCH), ("sas_plan",)), self.name)


PLANNER = BlindSearch()

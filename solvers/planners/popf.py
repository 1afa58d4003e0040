"""POPF as a registered planner: the temporal planner in force when it is on PATH (it ships no
wheel). Its argv and output reading are solvers.external."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from solvers import locate
from solvers.planners import BasePlanner, RunRequest

if TYPE_CHECKING:
    from solvers.limits import Limits
    from solvers.results import PlanResult


class Popf(BasePlanner):
    name = "popf"
    label = "popf"
    roles = frozenset({"temporal"})
    install = "optional (Kairos plans temporal tasks without it): build it, see k8s/images/build-planners.sh"

    def available(self) -> bool:
        return locate.popf_binary() is not None

    def version(self) -> str | None:
        found = locate.popf_binary()
        return str(found) if found is not None else None

    def cache_id(self) -> str:
        return f" {locate.popf_binary()}"

    def ro_paths(self) -> list[Path]:
        from solvers import loader

        found = locate.popf_binary()
        return [found, *loader.sandbox_binds(found)] if found is not None else []

    def plan(self, domain: str, problem: str, *, alias: str, search: str | None, limits: Limits,
             run: RunRequest) -> PlanResult:
        from solvers import external

        return external.popf_result(run({"kind": "exec", "argv": external.popf_argv(limits)}, ()))


PLANNER = Popf()

"""Kairos (kairos-planner wheel) as a registered planner and validator: the temporal planner
when POPF is absent, the validator when VAL is absent. Its CLI code is solvers.kairos_cli."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from solvers import locate
from solvers.planners import BasePlanner, RunRequest

if TYPE_CHECKING:
    from solvers.limits import Limits
    from solvers.results import PlanResult, ValidationResult


class Kairos(BasePlanner):
    name = "kairos"
    label = "kairos"
    roles = frozenset({"temporal", "validator"})
    required = True
    install = "pip install kairos-planner==1.0.6"

    def available(self) -> bool:
        return locate.kairos_binary() is not None

    def version(self) -> str | None:
        found = locate.kairos_binary()
        if found is None:
            return None
        line = locate.first_line([str(found), "--version"]) or ""
        return line.removeprefix("kairos ").strip() or (locate.dist_version("kairos-planner") or "unknown")

    def cache_id(self) -> str:
        return f"{locate.dist_version('kairos-planner') or ''} {locate.kairos_binary()}"

    def ro_paths(self) -> list[Path]:
        found = locate.kairos_binary()
        return [found] if found is not None else []

    def plan(self, domain: str, problem: str, *, alias: str, search: str | None, limits: Limits,
             run: RunRequest) -> PlanResult:
        from solvers import kairos_cli

        run_result = run({"kind": "exec", "argv": kairos_cli.solve_argv(limits)}, (kairos_cli.PLAN,))
        return kairos_cli.solve_result(run_result, self.name)

    def validate(self, plan_text: str, *, limits: Limits, run: RunRequest) -> ValidationResult:
        from solvers import kairos_cli

        return kairos_cli.validation_result(run({"kind": "exec", "argv": kairos_cli.validate_argv()}, ()), self.name,
                                            plan_text)


PLANNER = Kairos()

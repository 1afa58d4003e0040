"""VAL's `Validate` as a registered validator, in force when it is on PATH (it ships no wheel).
Its argv and report reading are solvers.external."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from solvers import locate
from solvers.planners import BasePlanner, RunRequest

if TYPE_CHECKING:
    from solvers.limits import Limits
    from solvers.results import ValidationResult


class Val(BasePlanner):
    name = "val"
    label = "val"
    roles = frozenset({"validator"})
    install = "optional (Kairos validates without it): build VAL from source, see k8s/images/build-planners.sh"

    def available(self) -> bool:
        return locate.val_binary() is not None

    def version(self) -> str | None:
        found = locate.val_binary()
        return (locate.first_line([str(found)]) or str(found)) if found is not None else None

    def cache_id(self) -> str:
        from solvers import external

        return f" {locate.val_binary()} -t {external.val_tolerance():g}"

    def ro_paths(self) -> list[Path]:
        from solvers import loader

        found = locate.val_binary()
        return [found, *loader.sandbox_binds(found)] if found is not None else []

    def validate(self, plan_text: str, *, limits: Limits, run: RunRequest) -> ValidationResult:
        from solvers import external, kairos_cli

        steps = sum(1 for line in plan_text.splitlines() if line.split(";", 1)[0].strip())
        if steps >= external.VAL_MAX_STEPS:
            # VAL refuses such plans ("Bad plan description!"): Kairos judges them, and says so.
            verdict = kairos_cli.validation_result(run({"kind": "exec", "argv": kairos_cli.validate_argv()}, ()),
                                                   "kairos", plan_text)
            verdict.message = (f"{verdict.message} (judged by Kairos: VAL refuses plans of "
                               f"{external.VAL_MAX_STEPS:,}+ steps, this one has {steps:,})")
            return verdict
        return external.val_result(run({"kind": "exec", "argv": external.val_argv()}, ()), plan_text)


PLANNER = Val()

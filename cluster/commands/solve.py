"""`halo solve`: plan (and optionally validate) one PDDL task."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def solve(
        domain: Path = typer.Argument(..., exists=True, dir_okay=False, help="PDDL domain file"),
        problem: Path = typer.Argument(..., exists=True, dir_okay=False, help="PDDL problem file"),
        planner: str = typer.Option("fd", help="fd | temporal"),
        validate: bool = typer.Option(False, "--validate", help="check the plan with the validator"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
        timeout: float = typer.Option(10.0, min=0.1, help="wall-clock limit in seconds"),
    ) -> None:
        """Plan a task; print the plan (and the validator's verdict)."""
        import solvers

        limits = solvers.Limits(timeout_s=timeout)
        domain_text, problem_text = domain.read_text(), problem.read_text()
        result = solvers.plan(domain_text, problem_text, planner=planner, limits=limits)  # type: ignore[arg-type]
        verdict = None
        if validate and result.ok:
            verdict = solvers.validate(domain_text, problem_text, result.plan_text, limits=limits)
        if as_json:
            typer.echo(json.dumps({"plan": result.to_dict(), "validation": verdict and verdict.to_dict()}, indent=2))
        else:
            typer.echo(f"planner: {result.planner}  category: {result.category.value}  "
                       f"cost: {result.cost}  wall: {result.wall_s:.3f}s")
            if result.ok:
                typer.echo(result.plan_text, nl=False)
            else:
                typer.echo(result.output_tail[-800:])
            if verdict is not None:
                typer.echo(f"validator: {verdict.validator}  valid: {verdict.valid}  "
                           f"category: {verdict.category.value}")
        raise typer.Exit(0 if result.ok and (verdict is None or verdict.valid) else 1)

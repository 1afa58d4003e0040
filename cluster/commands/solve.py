"""`halo solve` and `halo validate` in the typer app (help, CliRunner, the manifests' checker).

The options are declared here so `halo --help` and the k8s manifest checker see them; parsing,
validation and the call itself are those of cluster/commands/solve_cli.py, which `halo` also
runs directly (without typer) for speed.
"""

from __future__ import annotations

import typer


def _forward(command: str, positional: list[str], options: dict[str, str | None], flags: dict[str, bool]) -> None:
    from cluster.commands import solve_cli

    argv: list[str] = []
    for name, value in options.items():
        if value is not None:
            argv += [name, value]
    argv += [name for name, on in flags.items() if on]
    raise typer.Exit(solve_cli.main(command, [*argv, "--", *positional]))


def register(app: typer.Typer) -> None:
    @app.command()
    def solve(
        domain: str = typer.Argument(..., help="PDDL domain file"),
        problem: str = typer.Argument(..., help="PDDL problem file"),
        planner: str = typer.Option("fd", help="fd | temporal | another registered planner"),
        alias: str = typer.Option(None, help="Fast Downward alias: lama-first (default), optimal (A* + LM-cut), ..."),
        search: str = typer.Option(None, help="a raw Fast Downward search string"),
        validate: bool = typer.Option(False, "--validate", help="check the plan with the validator"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
        timeout: str = typer.Option("10", help="wall-clock limit of the whole call in seconds"),
        max_file_mb: str = typer.Option(None, help="largest input file accepted in MB (default 8)"),
    ) -> None:
        """Plan a task; print the plan (and the validator's verdict)."""
        _forward("solve", [domain, problem],
                 {"--planner": planner, "--alias": alias, "--search": search, "--timeout": timeout,
                  "--max-file-mb": max_file_mb},
                 {"--validate": validate, "--json": as_json})

    @app.command("validate")
    def validate_command(
        domain: str = typer.Argument(..., help="PDDL domain file"),
        problem: str = typer.Argument(..., help="PDDL problem file"),
        plan: str = typer.Argument(..., help="plan file (IPC format)"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
        timeout: str = typer.Option("10", help="wall-clock limit in seconds"),
        max_file_mb: str = typer.Option(None, help="largest input file accepted in MB (default 8)"),
    ) -> None:
        """Check a plan: valid, or the failing step with its unsatisfied precondition, or the unreached goal."""
        _forward("validate", [domain, problem, plan], {"--timeout": timeout, "--max-file-mb": max_file_mb},
                 {"--json": as_json})

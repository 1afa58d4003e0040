"""The `halo` command line. Each command group lives in its own module under
cluster/commands/ and registers itself on the app; heavy imports stay inside the commands."""

from __future__ import annotations

import importlib
import sys
from typing import Any

# Run without typer or the other commands' imports, so a one-shot call starts fast.
FAST_COMMANDS = ("solve", "validate")

# One module per command group; each exposes `register(app: typer.Typer) -> None`.
COMMAND_MODULES = (
    "cluster.commands.solve",
    "cluster.commands.doctor",
    "cluster.commands.serve",
    "cluster.commands.episode",
    "cluster.commands.report",
    "cluster.commands.rollout",
    "cluster.commands.loop",
    "cluster.commands.dataset",
    "cluster.commands.train",
    "cluster.commands.eval",
    "cluster.commands.tasks",
    "cluster.commands.sim",
)



def _build_app() -> Any:
    import typer

    app = typer.Typer(add_completion=False, no_args_is_help=True, help="HALO cluster: verified plans at scale.")

    @app.callback()
    def _root() -> None:
        """HALO cluster: natural-language planning problems to verified plans at scale."""

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(app)
    return app


def __getattr__(name: str) -> Any:
    """`cluster.cli.app` (the typer app) is built on first use."""
    if name == "app":
        app = globals()["app"] = _build_app()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in FAST_COMMANDS:
        from cluster.commands import solve_cli

        sys.exit(solve_cli.one_shot(sys.argv[1], sys.argv[2:]))
    __getattr__("app")()


if __name__ == "__main__":
    main()

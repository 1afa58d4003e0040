"""The `halo` command line. Each command group lives in its own module under
cluster/commands/ and registers itself on the app; heavy imports stay inside the commands."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="HALO cluster: verified plans at scale.")

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
)



@app.callback()
def _root() -> None:
    """HALO cluster: natural-language planning problems to verified plans at scale."""


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

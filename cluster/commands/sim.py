"""`halo sim world`: the simulated world's parameters (the default world file, or check one)."""

from __future__ import annotations

import typer

sim_app = typer.Typer(no_args_is_help=True, help="The simulated agent world: its world files.")


@sim_app.command("world")
def world(
    dump: bool = typer.Option(False, "--dump", help="print the default world file (a template for another world)"),
    check: str = typer.Option(None, "--check", help="validate a world file; print its name and hash"),
) -> None:
    """Print the default world file (--dump) or validate one (--check FILE); both print the hash runs record."""
    from rollout.sim.world import SimConfig
    from rollout.sim.world_file import WorldFileError, default_world_text, load_world

    if dump == (check is not None):
        typer.echo("error: give exactly one of --dump or --check FILE", err=True)
        raise typer.Exit(2)
    if dump:
        typer.echo(default_world_text(), nl=False)
        return
    try:
        config = SimConfig.from_world(load_world(check))
    except WorldFileError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"{check}: world {config.world_name!r}, hash {config.world_hash} "
               f"(default world: {SimConfig().world_hash})")


def register(app: typer.Typer) -> None:
    app.add_typer(sim_app, name="sim")

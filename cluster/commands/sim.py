"""`halo sim world`: the simulated world's parameters (the default world file, or check one)."""

from __future__ import annotations

import typer

sim_app = typer.Typer(no_args_is_help=True, help="The simulated agent world: its world files.")


@sim_app.command("world")
def world(
    dump: bool = typer.Option(False, "--dump", help="print the default world file (a template for another world)"),
    check: str = typer.Option(None, "--check", help="validate a world file; print its name and hash"),
    worlds: int = typer.Option(0, "--worlds", help="write N worlds of a perturbed family to --out"),
    world_seed: int = typer.Option(1, "--world-seed", help="the family's seed (with --worlds)"),
    out: str = typer.Option(None, "--out", help="directory for --worlds"),
) -> None:
    """Print the default world file (--dump), validate one (--check FILE) or write a family of
    perturbed worlds (--worlds N --world-seed S --out DIR); each names the hash runs record."""
    from rollout.sim.world import SimConfig
    from rollout.sim.world_file import WorldFileError, default_world_text, load_world

    if dump + (check is not None) + (worlds > 0) != 1 or (worlds > 0) != (out is not None):
        typer.echo("error: give exactly one of --dump, --check FILE or --worlds N --out DIR", err=True)
        raise typer.Exit(2)
    if worlds:
        _write_family(worlds, world_seed, out)
        return
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


def _write_family(n: int, seed: int, out: str) -> None:
    from pathlib import Path

    from rollout.sim.world_family import draw_worlds, to_yaml

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for world in draw_worlds(n, seed):
        path = folder / f"{world.name}.yaml"
        path.write_text(to_yaml(world))
        typer.echo(f"{path}: world {world.name!r}, hash {world.hash}")


def register(app: typer.Typer) -> None:
    app.add_typer(sim_app, name="sim")

"""`halo loop --config loop.yaml` runs the online learning loop; `halo loop status` shows its history."""

from __future__ import annotations

from pathlib import Path

import typer

loop_app = typer.Typer(help="The online learning loop: collect, retrain, gate, promote.",
                       invoke_without_command=True, no_args_is_help=False)


def register(app: typer.Typer) -> None:
    app.add_typer(loop_app, name="loop")


@loop_app.callback()
def loop(
    ctx: typer.Context,
    config: Path = typer.Option(None, "--config", help="loop.yaml (see docs/loop.md)"),
    address: str = typer.Option(None, "--address", help="join this Ray cluster (default: in-process, or RAY_ADDRESS)"),
    max_cycles: int = typer.Option(None, "--max-cycles", help="stop after this many cycles (0: run until stopped)"),
) -> None:
    """Run the loop until stopped (Ctrl-C); a restart resumes from the last completed step."""
    if ctx.invoked_subcommand is not None:
        return
    if config is None:
        typer.echo("halo loop: --config loop.yaml is required (or use `halo loop status`)", err=True)
        raise typer.Exit(2)
    from cluster.loop.config import LoopConfig, LoopConfigError

    try:
        cfg = LoopConfig.load(config, address=address, max_cycles=max_cycles)
        from cluster.preflight import check_store

        check_store(cfg.store)  # no credentials, no answer: one line and exit 3
    except LoopConfigError as exc:
        typer.echo(f"halo loop: {exc}", err=True)
        raise typer.Exit(2) from exc
    from cluster.loop.events import EventLogError
    from cluster.loop.runner import LoopError, LoopRunner
    from cluster.loop.serving import ServingError
    from cluster.ray_cluster import shutdown, start_or_join

    handle = start_or_join(cfg.address)
    try:
        LoopRunner(cfg, echo=typer.echo).run()
    except KeyboardInterrupt:
        typer.echo("halo loop: interrupted; run the same command to resume from the last completed step")
        raise typer.Exit(130) from None
    except (LoopError, EventLogError, ServingError) as exc:
        typer.echo(f"halo loop: {exc}", err=True)
        raise typer.Exit(1) from exc
    finally:
        shutdown(handle)


@loop_app.command("status")
def status(
    config: Path = typer.Option(None, "--config", help="loop.yaml (gives the store and the loop name)"),
    store: str = typer.Option(None, "--store", help="trajectory store URL (instead of --config)"),
    name: str = typer.Option("default", "--name", help="loop name (instead of --config)"),
    plot: Path = typer.Option(Path("loop-status.png"), "--plot", help="where to write the PNG plot"),
) -> None:
    """Print the loop's cycles (data in, model out, gate metrics, decision) and plot them."""
    from cluster.loop.config import LoopConfig, LoopConfigError
    from cluster.loop.events import EventLog, EventLogError
    from cluster.loop.status import status as loop_status
    from rollout.store import TrajectoryStore

    try:
        if config is not None:
            cfg = LoopConfig.load(config)
            store, name = store or cfg.store, cfg.name
        text, written = loop_status(EventLog(TrajectoryStore(store or LoopConfig().store), name), plot)
    except (LoopConfigError, EventLogError) as exc:
        typer.echo(f"halo loop status: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(text)
    if written:
        typer.echo(f"plot: {written}")


@loop_app.command("publish")
def publish(
    model: Path = typer.Argument(..., help="a trained model directory (manifest.json + weights)"),
    store: str = typer.Option(None, "--store", help="trajectory store URL (default: $HALO_STORE_URL)"),
    as_path: str = typer.Option(..., "--as", help="path in the store, e.g. models/current"),
) -> None:
    """Copy a trained model into the store (manifest verified first, uploaded last); print its URL."""
    from cluster.config import Settings
    from cluster.loop.publish import publish_model
    from rollout.store import StoreError, TrajectoryStore
    from train.manifest import ManifestError

    try:
        url, manifest = publish_model(TrajectoryStore(store or Settings.from_env().store_url), model, as_path)
    except (ManifestError, StoreError, ValueError) as exc:
        typer.echo(f"halo loop publish: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"published {manifest.name} {manifest.version} ({manifest.policy_class}) at {url}")

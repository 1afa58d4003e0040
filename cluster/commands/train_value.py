"""`halo train --value --from STORE/RUN --out DIR`: the search's value model (train/value_model.py)."""

from __future__ import annotations

from typing import Any

import typer

# options of the policy trainers that --value does not read (a user who gives one gets told)
_NOT_WITH_VALUE = ("data", "policy_class", "base_model", "init_from")


def train_value(artifact: Any, sources: list[str], held_out: float, feature_set: str = "all") -> None:
    """Read the runs, fit, write the artifact (`artifact`: the Artifact options of `halo train`:
    local or a store URL); print its held-out figures."""
    from solvers.errors import InputError
    from train.dataset import parse_sources, read_sources
    from train.store_io import stage_output, upload_output
    from train.value_model import train_value_model

    given = [f"--{name.replace('_', '-')}" for name in _NOT_WITH_VALUE if getattr(artifact, name)]
    if given:
        raise typer.BadParameter(f"--value trains from --from runs; {', '.join(given)} do not apply")
    if not sources:
        raise typer.BadParameter("--value needs --from STORE/RUN (repeatable): the runs to learn from")
    try:
        if artifact.out.startswith(("s3://", "s3a://")):
            from cluster.preflight import check_store

            check_store(artifact.out)
        local = stage_output(artifact.out)
        episodes = read_sources(sources)
        runs = [f"{store}/{run}" for store, run in parse_sources(sources)]
        typer.echo(f"training the value model on {len(episodes)} episodes from {', '.join(runs)}", err=True)
        manifest = train_value_model(episodes, local, name=_name(artifact.out, artifact.name), data_versions=runs,
                                     val_fraction=held_out, feature_set=feature_set)
        where = upload_output(local, artifact.out)
    except (InputError, ValueError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"{manifest.policy_class} model {manifest.name} {manifest.version} -> {where} "
               f"(use: search:prior=SPEC,...,value={where})")
    for key, value in sorted(manifest.metrics.items()):
        typer.echo(f"  {key:>24}: {value:.4g}")


def _name(out: str, name: str) -> str:
    return name or out.rstrip("/").rsplit("/", 1)[-1]

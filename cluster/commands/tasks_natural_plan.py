"""`halo tasks generate natural_plan[:KIND+...]` and `classical-paper`: the paper-shaped generated sets."""

from __future__ import annotations

import time
from pathlib import Path

import typer


def generate_natural_plan(domain: str, out: str, count: int | None, seed: int, difficulty: str | None) -> None:
    from rollout.tasks.natural_plan.taskset import (
        NaturalPlanGenError,
        NPJobStats,
        generate_set,
        parse_kinds,
        parse_levels,
    )

    def progress(s: NPJobStats) -> None:
        typer.echo(f"  {s.kind}/{s.level}: {s.kept}/{s.wanted} tasks, {s.duplicates} duplicates, "
                   f"{s.rejected} rejected, {s.wall_s:.1f}s", err=True)

    t0 = time.monotonic()
    try:
        kinds, levels = parse_kinds(domain), parse_levels(difficulty)
        stats = generate_set(Path(out), kinds, levels, 100 if count is None else count, seed, progress)
    except NaturalPlanGenError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    total = sum(s.kept for s in stats)
    typer.echo(f"{total} Natural Plan tasks in {time.monotonic() - t0:.1f}s -> {out} (use --tasks gen:{out} or "
               f"natural_plan:{out}; benchmark-format files in {out}/natural_plan/)")


def generate_classical_paper(out: str, count: int | None, seed: int, difficulty: str | None) -> None:
    from rollout.tasks.generators.paper_classical import PER_LEVEL, generate_paper_classical

    if difficulty:
        typer.echo("error: preset 'classical-paper' fixes its own levels; leave out --difficulty", err=True)
        raise typer.Exit(2)
    if count is not None and count < 1:
        typer.echo(f"error: --count must be at least 1, got {count}", err=True)
        raise typer.Exit(2)
    t0 = time.monotonic()
    kept = generate_paper_classical(Path(out), PER_LEVEL if count is None else count, seed,
                                    log=lambda msg: typer.echo(f"  {msg}", err=True))
    typer.echo(f"{kept} classical tasks in {time.monotonic() - t0:.1f}s -> {out} (use --tasks gen:{out})")

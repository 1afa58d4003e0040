"""`halo tasks score`: a Natural Plan data file's accuracy per task type and difficulty bucket."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def run_score(file: str, answer_field: str, as_json: bool) -> None:
    from rollout.tasks.natural_plan.data_file import DataFileError, score_data_file

    try:
        scores = score_data_file(Path(file), answer_field)
    except DataFileError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        rows = [s.to_json() for s in scores]
        typer.echo(json.dumps(rows[0] if len(rows) == 1 else rows, indent=1))
        return
    for s in scores:
        typer.echo(f"{s.task}: {s.correct}/{s.n} correct, accuracy {s.accuracy:.4f} (field {answer_field})")
        for name, slot in s.to_json()["by_bucket"].items():
            typer.echo(f"  {name}: {slot['correct']}/{slot['n']} = {slot['accuracy']:.4f}")

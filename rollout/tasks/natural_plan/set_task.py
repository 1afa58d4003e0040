"""A generated set's row of a Natural Plan type as a task scored by the benchmark's checker
(kept apart from taskset.py, which writes sets, so that reading a set does not import writing)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rollout.tasks.base import Task


def natural_plan_task(task: Task, root: str, row: dict) -> Task:
    stem = row["problem_file"][len("problems/"):-len(".pddl")]
    answer = (Path(root) / "answers" / f"{stem}.json").read_text().strip()
    spec = (Path(root) / "specs" / f"{stem}.json").read_text().strip()
    return replace(task, family="natural_plan", scoring="checker", spec_json=spec, gold_answer=answer)

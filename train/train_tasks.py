"""The list of task IDs an artifact was trained on, kept beside it, so evaluation can hold them out."""

from __future__ import annotations

import json
from pathlib import Path

from rollout.tasks.base import Task

TRAIN_TASKS_FILE = "train_tasks.json"


def write_train_tasks(model_dir: str | Path, task_ids: list[str]) -> None:
    (Path(model_dir) / TRAIN_TASKS_FILE).write_text(json.dumps(sorted(set(task_ids)), indent=1))


def held_out(tasks: list[Task], model_dir: str | Path) -> list[Task]:
    path = Path(model_dir) / TRAIN_TASKS_FILE
    if not path.is_file():
        return tasks
    seen = set(json.loads(path.read_text()))
    return [t for t in tasks if t.task_id not in seen]

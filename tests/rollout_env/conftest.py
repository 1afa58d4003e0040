"""Fixtures for the refinement-loop environment tests."""

from __future__ import annotations

import pytest

from rollout.tasks import Task, load_tasks


@pytest.fixture(scope="session")
def tasks() -> dict[str, Task]:
    return {t.task_id: t for t in load_tasks("planbench:all:6")}

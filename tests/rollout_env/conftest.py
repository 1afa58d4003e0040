"""Fixtures for the refinement-loop environment tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import solvers
from rollout.tasks import Task, load_tasks


@pytest.fixture(scope="session")
def tasks() -> dict[str, Task]:
    return {t.task_id: t for t in load_tasks("planbench:all:6")}


@pytest.fixture
def solver_cache() -> Iterator[None]:
    """The solver result cache on for one test (the search's branches share planner runs)."""
    solvers.configure_cache(True)
    yield
    solvers.configure_cache(False)

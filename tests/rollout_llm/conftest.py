"""Shared fixtures for the LLM-client, teacher and deterministic-agent tests."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

# Let `import tests.fake_openai` work however pytest was started.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import solvers  # noqa: E402
from rollout.agents.base import AgentContext  # noqa: E402
from rollout.tasks.base import Task  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.fixture
def blocksworld() -> tuple[str, str]:
    return fixture_text("blocksworld-domain.pddl"), fixture_text("blocksworld-instance-2.pddl")


@pytest.fixture
def logistics() -> tuple[str, str]:
    return fixture_text("logistics-domain.pddl"), fixture_text("logistics-4-0.pddl")


def make_ctx(**extras) -> AgentContext:
    task = Task("test/blocksworld/2", "planbench", "blocksworld", "Stack block c on block a.")
    return AgentContext(task=task, limits=solvers.Limits(timeout_s=20), rng=random.Random(0), extras=extras)

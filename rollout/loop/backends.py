"""The agent backends a RefinementEnv (rollout/loop/env.py) is given: where its LLM agents do their work.

- `LLMAgents`: real LLM agents calling a chat backend; the loop starts from an empty domain.
- Named backends (`BACKENDS`): a backend that plays the LLM agents itself, registered by name as
  "module:factory" so the loop never imports it. "sim" is the simulated agent world
  (rollout/sim/backend.py: `SimAgents`), which drafts the starting PDDL and plays every LLM agent.

A backend is built once (per worker, per command) and shared by all its episodes; `world()` is
called once per episode by `RefinementEnv.reset`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rollout.agents.base import ChatBackend
from rollout.tasks.base import Task
from solvers.registry import Registry

# A factory takes (the world's config or None for its default, the transport client or None).
BACKENDS: Registry[Callable[[Any, ChatBackend | None], Any]] = Registry("agent backend")
BACKENDS.register("sim", "rollout.sim.backend:sim_backend")


@dataclass
class LLMAgents:
    """Real LLM agents: `name` labels the episodes (e.g. "openai:MODEL"), `llm` is their client."""

    name: str
    llm: ChatBackend | None = None

    def world(self, task: Task, seed: int) -> None:
        return None


def backend_named(name: str, world_config: Any, llm: ChatBackend | None) -> Any:
    """The agent backend for an episode's `llm_backend` label: a registered one, else real LLM agents."""
    if name in BACKENDS.names():
        return BACKENDS.get(name)(world_config, llm)
    return LLMAgents(name, llm)

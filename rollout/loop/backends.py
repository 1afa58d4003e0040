"""The agent backends a RefinementEnv (rollout/loop/env.py) is given: where its LLM agents do their work.

- `SimAgents`: the simulated agent world (rollout/sim); one `SimWorld` per episode drafts the
  starting PDDL and plays the LLM for every LLM agent. An optional transport (an
  OpenAI-protocol client) makes each simulated call also travel over HTTP.
- `LLMAgents`: real LLM agents calling a chat backend; the loop starts from an empty domain.

A backend is built once (per worker, per command) and shared by all its episodes; `world()` is
called once per episode by `RefinementEnv.reset`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rollout.agents.base import ChatBackend
from rollout.sim.world import SimConfig, SimWorld
from rollout.tasks.base import Task


@dataclass
class SimAgents:
    """The simulated world as the backend; episodes are labelled llm_backend="sim"."""

    config: SimConfig = field(default_factory=SimConfig)
    transport: ChatBackend | None = None
    name: str = "sim"

    @property
    def llm(self) -> ChatBackend | None:
        return self.transport

    def world(self, task: Task, seed: int) -> SimWorld:
        return SimWorld(task, self.config, seed=seed, transport=self.transport)


@dataclass
class LLMAgents:
    """Real LLM agents: `name` labels the episodes (e.g. "openai:MODEL"), `llm` is their client."""

    name: str
    llm: ChatBackend | None = None

    def world(self, task: Task, seed: int) -> None:
        return None

"""The simulated agent world as an episode's agent backend (rollout.loop.env.AgentBackend).

One `SimWorld` per episode drafts the starting PDDL and plays the LLM for every LLM agent. An
optional transport (an OpenAI-protocol client) makes each simulated call also travel over HTTP.
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


def sim_backend(world_config: SimConfig | None, llm: ChatBackend | None) -> SimAgents:
    """The backend `EpisodeConfig(llm_backend="sim")` stands for (None: the default world)."""
    return SimAgents(world_config or SimConfig(), transport=llm)

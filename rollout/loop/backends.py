"""The agent backends a RefinementEnv (rollout/loop/env.py) is given: where its LLM agents do their work.

- `SimAgents`: the simulated agent world (rollout/sim); one `SimWorld` per episode drafts the
  starting PDDL and plays the LLM for every LLM agent. An optional transport (an
  OpenAI-protocol client) makes each simulated call also travel over HTTP.
- `LLMAgents`: real LLM agents calling a chat backend; the loop starts from an empty domain.

A backend is built once (per worker, per command) and shared by all its episodes; `world()` is
called once per episode by `RefinementEnv.reset`. `agent_backend_for(--llm spec)` is the one place
that chooses it: `AGENT_BACKENDS` maps the spec's kind to a builder (the simulated world's builder
lives with the world, in rollout.sim.spec, named by "module:attr" so this layer does not import it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rollout.agents.base import ChatBackend
from rollout.llm.spec import LLMSpec
from rollout.sim.world import SimConfig, SimWorld
from rollout.tasks.base import Task
from solvers.registry import Registry

if TYPE_CHECKING:
    from rollout.loop.env import AgentBackend


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


# (the parsed --llm spec, the LLM client's connection pool or None for the client's default) -> backend
BackendBuilder = Callable[[LLMSpec, "int | None"], "AgentBackend"]
AGENT_BACKENDS: Registry[BackendBuilder] = Registry("LLM backend")


def llm_agents(spec: LLMSpec, pool: int | None) -> LLMAgents:
    """Real LLM agents on one OpenAI-protocol client of `pool` connections (HALO_LLM_MAX_CONCURRENCY wins)."""
    from rollout.llm import OpenAIChatClient, config_from_env

    overrides = {} if pool is None or os.environ.get("HALO_LLM_MAX_CONCURRENCY") else {"max_concurrency": pool}
    return LLMAgents(spec.backend, OpenAIChatClient(config_from_env(spec.model, spec.base_url, **overrides)))


AGENT_BACKENDS.register("openai", llm_agents)
AGENT_BACKENDS.register("sim", "rollout.sim.spec:sim_agents")


def agent_backend_for(spec: str | LLMSpec, *, pool: int | None = 512) -> AgentBackend:
    """The agent backend of an --llm spec: the simulated world (its calls over HTTP when the spec
    names a base_url) or real LLM agents; `pool`: the connections of its one LLM client."""
    llm = spec if isinstance(spec, LLMSpec) else LLMSpec.parse(spec)
    return AGENT_BACKENDS.get(llm.kind)(llm, pool)

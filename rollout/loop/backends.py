"""The agent backends a RefinementEnv (rollout/loop/env.py) is given: where its LLM agents do their work.

- `LLMAgents`: real LLM agents calling a chat backend; the loop starts from an empty domain.
- Named backends (`BACKENDS`): a backend that plays the LLM agents itself, registered by name as
  "module:factory" so the loop never imports it. "sim" is the simulated agent world
  (rollout/sim/backend.py: `SimAgents`), which drafts the starting PDDL and plays every LLM agent.

A backend is built once (per worker, per command) and shared by all its episodes; `world()` is
called once per episode by `RefinementEnv.reset`. `agent_backend_for(--llm spec)` is the one place
that chooses it from a spec: `SPEC_BACKENDS` maps the parsed `LLMSpec`'s kind to a builder (the
simulated world's, `rollout.sim.spec:sim_agents`, is named by string like the named backends).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rollout.agents.base import ChatBackend
from rollout.llm.spec import LLMSpec
from rollout.tasks.base import Task
from solvers.registry import Registry

if TYPE_CHECKING:
    from rollout.loop.env import AgentBackend

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


# --llm kind -> builder (the parsed spec, the LLM client's connections or None for the client's default)
SpecBackendBuilder = Callable[[LLMSpec, "int | None"], "AgentBackend"]
SPEC_BACKENDS: Registry[SpecBackendBuilder] = Registry("LLM backend")


def llm_agents(spec: LLMSpec, pool: int | None) -> LLMAgents:
    """Real LLM agents on one OpenAI-protocol client of `pool` connections (HALO_LLM_MAX_CONCURRENCY wins)."""
    from rollout.llm import OpenAIChatClient, config_from_env

    overrides = {} if pool is None or os.environ.get("HALO_LLM_MAX_CONCURRENCY") else {"max_concurrency": pool}
    return LLMAgents(spec.backend, OpenAIChatClient(config_from_env(spec.model, spec.base_url, **overrides)))


SPEC_BACKENDS.register("openai", llm_agents)
SPEC_BACKENDS.register("sim", "rollout.sim.spec:sim_agents")


def agent_backend_for(spec: str | LLMSpec, *, pool: int | None = 512) -> AgentBackend:
    """The agent backend of an --llm spec: the simulated world (its calls over HTTP when the spec
    names a base_url) or real LLM agents; `pool`: the connections of its one LLM client."""
    llm = spec if isinstance(spec, LLMSpec) else LLMSpec.parse(spec)
    return SPEC_BACKENDS.get(llm.kind)(llm, pool)

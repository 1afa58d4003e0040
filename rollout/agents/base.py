"""The agent interface and registry.

An agent turns the current EpisodeState into an AgentOutcome (new domain/problem/plan text plus
accounting). Agents are registered by stable ID in rollout.core.agent_table.AGENTS (one line per
added agent); `make_agent` builds one from there. The episode loop (not the agent) runs the
planner and validator afterwards.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rollout.core.agent_table import AGENTS, AgentInfo, agent_class, agent_info, agent_name
from rollout.core.state import EpisodeState
from rollout.tasks.base import Task
from solvers.errors import InputError

if TYPE_CHECKING:
    from solvers import Limits


@dataclass
class AgentOutcome:
    domain: str
    problem: str
    plan: str = ""  # "" means: let the loop call the planner
    proposed_solution: str = ""
    natural_language: str = ""  # agent 12's rendering
    ok: bool = True  # False: the agent failed (bad LLM reply, ...); state is kept unchanged
    message: str = ""  # what the agent did or why it failed, for traces and records
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    solver_cpu_s: float = 0.0


class ChatBackend(Protocol):
    """A real LLM chat endpoint (rollout.llm implements it)."""

    async def chat(self, messages: list[dict[str, str]], *, purpose: str) -> Any: ...


class BackendMisconfigured(InputError, RuntimeError):
    """A chat backend that cannot answer in this setting at all (not a failed call), e.g. the
    simulated teacher outside its simulated world: what was asked for is wrong, so callers end the
    episode with it, no fallback."""


@dataclass
class Draft:
    """The PDDL an episode starts from, when its agent backend drafts one (empty strings: none)."""

    domain: str
    problem: str
    plan: str


class LLMStandIn(Protocol):
    """Plays every LLM agent of one episode in place of a chat endpoint (the simulated world is one)."""

    def apply_llm_agent(
        self, agent_id: int, state: EpisodeState, *, dynamic_profile: str | None = None
    ) -> AgentOutcome: ...


@dataclass
class AgentContext:
    """Per-episode resources an agent may use. For LLM agents `stand_in`, when set, plays the LLM;
    otherwise they call `llm`."""

    task: Task
    limits: Limits
    rng: random.Random
    llm: ChatBackend | None = None
    stand_in: LLMStandIn | None = None
    llm_backend_name: str = "sim"
    extras: dict[str, Any] = field(default_factory=dict)


class Agent(ABC):
    agent_id: int

    @property
    def info(self) -> AgentInfo:
        return agent_info(self.agent_id)

    @property
    def name(self) -> str:
        return agent_name(self.agent_id)

    @abstractmethod
    async def apply(
        self, state: EpisodeState, ctx: AgentContext, *, dynamic_profile: str | None = None
    ) -> AgentOutcome:
        """Return the new artefacts. Must not raise for bad model output: return ok=False."""


def registered_agents() -> dict[int, type[Agent]]:
    """Every registered agent's class by ID (imports their modules)."""
    return {int(key): agent_class(int(key)) for key in AGENTS.names()}


def make_agent(agent_id: int) -> Agent:
    """A fresh agent for `agent_id`; KeyError when no agent has that ID."""
    return agent_class(agent_id)()

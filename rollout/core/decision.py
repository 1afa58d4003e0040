"""The one orchestrator-policy interface: state -> decision, with its source and latency.

Every policy (rules, teacher LLM, random, scripted, trained student, HTTP client, search)
implements `Policy`. Synchronous `decide` is the primitive; `adecide` lets network-bound
policies overlap many episodes in one asyncio loop.

A `Decision` keeps its fields wherever it travels: code that changes one uses
`dataclasses.replace`, and `Decision.from_dict(d.to_dict())` (the HTTP answer's shape) is `d`.
A trained policy's decisions are labelled `MODEL` everywhere: in the policy, on the service, in
the HTTP answer and in the trajectory.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from rollout.core.agent_table import agent_name
from rollout.core.state import EpisodeState

# "student" is what trained policies wrote before they all said "model"; it stays readable (stored
# trajectories, their /v1/feedback replays) but no policy emits it.
DecidedBy = Literal["rule", "teacher", "student", "search", "random", "scripted", "model", "fallback"]
MODEL: DecidedBy = "model"


@dataclass(frozen=True)
class Decision:
    agent_id: int
    decided_by: DecidedBy
    latency_ms: float = 0.0
    reason: str = ""
    policy_version: str = ""
    # Free text for the dynamic agent's task profile (agent_id == AgentId.DYNAMIC).
    dynamic_profile: str | None = None
    # What the decision itself cost (an LLM orchestrator such as the prompted teacher).
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    @property
    def agent_name(self) -> str:
        return agent_name(self.agent_id)

    @property
    def is_hardcoded(self) -> bool:
        return self.decided_by == "rule"

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in _DECISION_FIELDS}  # all scalars: no deep copy
        data["agent_id"] = int(self.agent_id)  # an AgentId travels as the plain integer
        data["agent_name"] = self.agent_name
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        """The decision `to_dict` wrote (`agent_name` is derived, so it is not read back)."""
        return cls(**{name: data[name] for name in _DECISION_NAMES if name in data})


_DECISION_FIELDS = fields(Decision)
_DECISION_NAMES = tuple(f.name for f in _DECISION_FIELDS)


class Policy(ABC):
    name: str = "policy"
    version: str = "0"
    # True for policies whose `decide` is pure CPU in microseconds (rules, scripted, random, a
    # linear model): `adecide` then runs it in the event loop, as a thread hand-off per step
    # costs more than the decision. Policies that block (HTTP, a language model) leave it False.
    decides_inline: bool = False

    @abstractmethod
    def _decide(self, state: EpisodeState) -> Decision:
        """Return a decision; latency is filled in by `decide`."""

    def decide(self, state: EpisodeState) -> Decision:
        t0 = time.perf_counter()
        decision = self._decide(state)
        return _with_latency(decision, t0)

    async def adecide(self, state: EpisodeState) -> Decision:
        if self.decides_inline:
            return self.decide(state)
        return await asyncio.to_thread(self.decide, state)

    def close(self) -> None:  # noqa: B027  (optional hook; most policies hold nothing)
        """Release resources (HTTP sessions, models)."""


def _with_latency(decision: Decision, t0: float) -> Decision:
    if decision.latency_ms:
        return decision
    return replace(decision, latency_ms=(time.perf_counter() - t0) * 1000.0)

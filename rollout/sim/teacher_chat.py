"""A simulated chat endpoint for the prompted teacher (`teacher:model=sim`).

The real `TeacherPolicy` builds its real prompt and sends it here instead of to an API. The
backend reads what the episode's simulated world knows is wrong (its hidden faults, the fault
in the drafted plan) and answers with:

- the repairing agent (the one the world would let fix the fault reported first) with
  probability `quality`;
- an unusable answer (prose that names no agent, or several agents) with probability
  `unparsable`, which exercises the teacher's correction round and its fallback;
- otherwise a wrong agent: with probability `systematic` the profile's stated confusion for
  that situation (`confusion`: the agent a prompted model plausibly mistakes for the right one,
  e.g. removing a precondition instead of adding the missing initial fact), else uniformly a
  plausible wrong one (a secondary repairer of that fault, what the visible symptom suggests,
  or the generalist).

P(right) depends on the situation class (`situation()`: an empty domain, a valid plan, the fault
the solvers report first, the drafted plan's fault, clean PDDL with a stale plan): a prompted
model's errors are systematic, so some classes are right well under half the time.

Tokens in are counted on the real prompt; tokens out are the short answer plus reasoning
tokens drawn from a log-normal; the call is priced with the named model's price table. The
latency is drawn per call and slept scaled by the world's `latency_scale` (as the simulated
agents are). Every call is recorded like `OpenAIChatClient.records`.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

from rollout.core.agent_table import NUM_AGENTS, AgentId, agent_name
from rollout.core.state import EpisodeState
from rollout.llm.prices import PriceTable
from rollout.llm.records import CallLedger, CallRecord, ChatReply, prompt_sha256
from rollout.policies.scripted import DEFAULT_RULES, symptom
from rollout.policies.teacher import DEFAULT_FALLBACK_ID, TeacherPolicy
from rollout.sim.faults import CATALOG
from rollout.sim.world import GENERALIST_IDS, SimConfig, SimWorld, SimWorldMissing, current_world
from rollout.sim.world_file import EMPTY, SITUATIONS, STALE, VALID, default_world
from solvers.params import read_params


# USD per million tokens (input, output), list prices as published by the providers in late 2025
# (the default world file's teacher_prices).
def _price_table(teacher_prices: dict[str, dict[str, float]]) -> PriceTable:
    return PriceTable.from_dict({"models": teacher_prices})


_DEFAULT_WORLD = default_world()
SIM_TEACHER_PRICES = _price_table(_DEFAULT_WORLD.teacher_prices)


@dataclass(frozen=True)
class TeacherProfile:
    """How a simulated prompted orchestrator behaves; see docs/rollout.md for the two profiles."""

    name: str
    model: str  # the price-table entry its calls are billed at
    quality: float  # P(the repairing agent) in a situation class `accuracy` does not list
    unparsable: float  # P(an answer names no usable agent), per attempt
    latency_median_ms: float
    latency_sigma: float
    reasoning_tokens_median: float  # hidden reasoning tokens billed as output, per call
    accuracy: dict[str, float] = field(default_factory=dict)  # situation class -> P(the repairing agent)
    confusion: dict[str, int] = field(default_factory=dict)  # situation class -> its systematic wrong agent
    systematic: float = 0.0  # P(a wrong answer is the class's stated confusion)
    reasoning_tokens_sigma: float = 0.5  # log-normal sigma of the reasoning tokens per call

    def p_right(self, situation_class: str) -> float:
        return self.accuracy.get(situation_class, self.quality)

    def check(self) -> TeacherProfile:
        for key in ("quality", "unparsable", "systematic"):
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"sim teacher {key} must be in [0, 1], got {value}")
        for cls, value in self.accuracy.items():
            if cls not in SITUATIONS or not 0.0 <= value <= 1.0:
                raise ValueError(f"sim teacher accuracy {cls}={value}: want a situation class "
                                 f"({', '.join(SITUATIONS)}) and a probability")
        for cls, agent in self.confusion.items():
            if cls not in SITUATIONS or not 0 <= agent < NUM_AGENTS:
                raise ValueError(f"sim teacher confusion {cls}={agent}: want a situation class and an agent ID")
        if self.latency_median_ms < 0 or self.latency_sigma < 0 or self.reasoning_tokens_median < 0:
            raise ValueError("sim teacher latency and reasoning tokens must be >= 0")
        return self

    @classmethod
    def from_world(cls, name: str, params: dict[str, Any]) -> TeacherProfile:
        return cls(name=name, **{k: (dict(v) if isinstance(v, dict) else v) for k, v in params.items()})


# The mistake a prompted model plausibly makes in each situation (the same for both default
# profiles; how often it makes it differs) and the two profiles: all in the default world file.
PROFILES: dict[str, TeacherProfile] = {name: TeacherProfile.from_world(name, params).check()
                                       for name, params in _DEFAULT_WORLD.teachers.items()}
CONFUSION: dict[str, int] = dict(PROFILES["weaker"].confusion)
DEFAULT_PROFILE = "weaker"

# Which deterministic agent undoes each plan fault of the draft.
_PLAN_FAULT_AGENT = {fc.kind: fc.repaired_by[0] for fc in CATALOG.values() if fc.target == "plan"}

_UNUSABLE = (
    "Looking at the validator output, the domain and the problem both need attention before planning again.",
    "Either AgentSyntaxPDDL or AgentDeepThinkPDDL could help here; both would be reasonable.",
    "Agent: the one that fixes the preconditions",
    "",
)


def count_tokens(text: str) -> int:
    """A BPE-like count without a tokenizer: a word piece per 4 letters/digits, one per symbol."""
    pieces = re.findall(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]", text)
    return sum(math.ceil(len(p) / 4) if p[0].isalnum() else 1 for p in pieces)


def situation(world: SimWorld, state: EpisodeState) -> str:
    """The situation class of `state` by what the world knows (a key of the profiles' tables)."""
    if not state.domain.strip():
        return EMPTY
    if state.plan_valid:
        return VALID
    if world.faults:
        order = list(CATALOG)
        return min(world.faults, key=lambda f: order.index(f.kind)).kind
    if world.draft_plan_fault and state.plan == world.draft_plan:
        return f"plan:{world.draft_plan_fault}"
    return STALE


def repairing_agent(world: SimWorld, state: EpisodeState) -> int:
    """The agent that would fix what is wrong now, by what the world knows."""
    cls = situation(world, state)
    if cls == EMPTY:
        return AgentId.EMERGENCY
    if cls == VALID:
        return AgentId.NOOP
    if cls.startswith("plan:"):
        return _PLAN_FAULT_AGENT[cls.removeprefix("plan:")]
    if cls == STALE:
        return GENERALIST_IDS[0]  # clean PDDL, stale plan: a rewrite makes the loop replan
    return CATALOG[cls].repaired_by[0]


def plausible_wrong(world: SimWorld, state: EpisodeState, right: int) -> list[int]:
    """Agents a prompted model could reasonably pick instead of `right`."""
    out: list[int] = []
    if world.faults:
        order = list(CATALOG)
        first = min(world.faults, key=lambda f: order.index(f.kind))
        out += CATALOG[first.kind].repaired_by[1:]
    out += DEFAULT_RULES.get(symptom(state), DEFAULT_RULES["unknown"])
    out += list(GENERALIST_IDS)
    seen: list[int] = []
    for a in out:
        if a != right and a not in seen and a not in (AgentId.NOOP, AgentId.NATURAL_LANGUAGE):
            seen.append(a)
    return seen or [a for a in range(NUM_AGENTS) if a not in (right, AgentId.NOOP, AgentId.NATURAL_LANGUAGE)]


class SimTeacherChat(CallLedger):
    """Implements `rollout.agents.base.ChatBackend` for the prompted teacher in the simulated world."""

    def __init__(self, profile: TeacherProfile, *, prices: PriceTable = SIM_TEACHER_PRICES,
                 overrides: dict[str, Any] | None = None) -> None:
        """`profile` as given; with `overrides` (make_sim_teacher_chat) the profile of that name in the
        episode's world is used instead, with the overrides applied (so a world file sets the teacher)."""
        self.profile = profile.check()
        self.prices = prices
        self.overrides = overrides
        self._records: list[CallRecord] = []
        self._by_world: dict[int, tuple[SimConfig, TeacherProfile, PriceTable]] = {}

    def _in_world(self, config: SimConfig) -> tuple[TeacherProfile, PriceTable]:
        """This teacher's profile and prices in the world `config` describes."""
        if self.overrides is None:
            return self.profile, self.prices
        hit = self._by_world.get(id(config))
        if hit is None or hit[0] is not config:
            params = config.teachers.get(self.profile.name)
            if params is None:
                raise SimWorldMissing(f"the simulated world {config.world_name!r} has no teacher profile "
                                      f"{self.profile.name!r} (it has: {', '.join(sorted(config.teachers))})")
            profile = replace(TeacherProfile.from_world(self.profile.name, params), **self.overrides).check()
            hit = (config, profile, _price_table(config.teacher_prices))
            if len(self._by_world) >= 64:  # configs made per episode: keep the cache small
                self._by_world.clear()
            self._by_world[id(config)] = hit
        return hit[1], hit[2]

    @property
    def model_name(self) -> str:
        return f"sim-{self.profile.name}({self.profile.model})"

    # TeacherPolicy passes the state its prompt was built from (the prompt itself cuts long sections).
    wants_state = True

    async def chat(self, messages: list[dict[str, str]], *, purpose: str = "",
                   state: EpisodeState | None = None) -> ChatReply:
        world = current_world()
        if world is None:
            raise SimWorldMissing("teacher:model=sim answers only inside the simulated agent world (--llm sim)")
        if state is None:
            raise ValueError("the simulated teacher needs the episode state the prompt was built from")
        if state.task_description != world.task.description:
            raise SimWorldMissing(f"the simulated world in this context is task {world.task.task_id}'s, not the "
                                  "task being decided (teacher:model=sim answers only inside its episode)")
        started = time.time()
        rng = random.Random(f"sim-teacher|{self.profile.name}|{world.seed}|{world.task.task_id}|{state.step}|"
                            f"{len(messages)}|{state.plan}|{state.error_category}")
        p, prices = self._in_world(world.config)
        text = self._answer(p, world, state, rng)
        tokens_in = sum(count_tokens(m.get("content", "")) + 4 for m in messages)
        reasoning = int(p.reasoning_tokens_median * math.exp(rng.gauss(0.0, p.reasoning_tokens_sigma)))
        tokens_out = count_tokens(text) + reasoning
        latency_ms = p.latency_median_ms * math.exp(rng.gauss(0.0, p.latency_sigma))
        delay = latency_ms / 1000.0 * world.config.latency_scale
        if delay > 0:
            await asyncio.sleep(delay)
        cost = prices.cost(p.model, tokens_in, tokens_out)
        self._records.append(CallRecord(purpose, self.model_name, prompt_sha256(messages), tokens_in, tokens_out,
                                        latency_ms, cost, "ok", 1, started))
        return ChatReply(text, tokens_in, tokens_out, latency_ms, cost, self.model_name, 1)

    def _answer(self, p: TeacherProfile, world: SimWorld, state: EpisodeState, rng: random.Random) -> str:
        if rng.random() < p.unparsable:
            return rng.choice(_UNUSABLE)
        cls = situation(world, state)
        right = repairing_agent(world, state)
        if rng.random() < p.p_right(cls):
            agent = right
        elif cls in p.confusion and p.confusion[cls] != right and rng.random() < p.systematic:
            agent = p.confusion[cls]
        else:
            agent = rng.choice(plausible_wrong(world, state, right))
        return f"Agent: {agent_name(agent)}\nReason: chosen from the validator and planner output."

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True)
class SimTeacherParams:
    """The keys of `teacher:model=sim,...`: a profile of the world, optionally overridden."""

    model: str = "sim"
    profile: str = DEFAULT_PROFILE  # weaker | stronger (or another profile of the world file)
    quality: float | None = None  # one accuracy for every situation, no systematic confusion
    unparsable: float | None = None
    fallback: int = DEFAULT_FALLBACK_ID
    attempts: int = 3


def make_sim_teacher_chat(params: SimTeacherParams) -> SimTeacherChat:
    """The chat backend of a `teacher:model=sim,...` spec."""
    if params.profile not in PROFILES:
        raise ValueError(f"unknown sim teacher profile {params.profile!r}; known: {', '.join(sorted(PROFILES))}")
    overrides: dict[str, Any] = {}
    if params.quality is not None:
        overrides.update(quality=params.quality, accuracy={}, systematic=0.0)
    if params.unparsable is not None:
        overrides.update(unparsable=params.unparsable)
    profile = replace(PROFILES[params.profile], **overrides).check()
    # the profile named in the episode's world (the default world's is `profile`), overrides on top
    return SimTeacherChat(profile, overrides=overrides)


def sim_teacher_factory(params: str, seed: int) -> TeacherPolicy:
    """`teacher:model=sim[,profile=weaker|stronger][,quality=q][,unparsable=p][,attempts=n][,fallback=id]`
    (rollout.policies.teacher.TEACHER_MODELS["sim"]); `seed` is unused (the answers are seeded per state)."""
    p = read_params(SimTeacherParams, params)
    chat = make_sim_teacher_chat(p)
    return TeacherPolicy(chat, model_name=chat.model_name, max_attempts=p.attempts, fallback_agent_id=p.fallback)


__all__ = ["CONFUSION", "PROFILES", "SIM_TEACHER_PRICES", "SITUATIONS", "SimTeacherChat", "SimTeacherParams",
           "SimWorldMissing", "TeacherProfile", "count_tokens", "make_sim_teacher_chat", "repairing_agent",
           "sim_teacher_factory", "situation"]

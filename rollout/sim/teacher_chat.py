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

from rollout.agent_table import EMERGENCY_ID, NATURAL_LANGUAGE_ID, NOOP_ID, NUM_AGENTS, agent_name
from rollout.llm.prices import PriceTable
from rollout.llm.records import CallLedger, CallRecord, ChatReply, prompt_sha256
from rollout.sim.faults import CATALOG
from rollout.sim.world import GENERALIST_IDS, SimWorld, SimWorldMissing, current_world
from rollout.state import EpisodeState

# USD per million tokens (input, output), list prices as published by the providers in late 2025.
SIM_TEACHER_PRICES = PriceTable.from_dict({"models": {
    "gpt-5-mini": {"input": 0.25, "output": 2.0},
    "gemini-3-flash": {"input": 0.50, "output": 3.0},
}})


# Situation classes beside the fault kinds of the catalog (plan faults are "plan:<kind>").
EMPTY, VALID, STALE = "empty_domain", "valid_plan", "stale_plan"
SITUATIONS = (EMPTY, VALID, *(f"plan:{k}" if fc.target == "plan" else k for k, fc in CATALOG.items()), STALE)


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
        if self.model not in SIM_TEACHER_PRICES.models:
            raise ValueError(f"sim teacher price model {self.model!r} unknown; known: "
                             f"{', '.join(sorted(SIM_TEACHER_PRICES.models))}")
        return self


# The mistake a prompted model plausibly makes in each situation (the same for both profiles; how
# often it makes it differs): reading a false precondition as "add the fact" / "drop the
# precondition" the wrong way round, the strict check's [semantic.*] type errors (filed under
# parse-error categories) as syntax, a valid plan as worth one more consistency check, ...
CONFUSION: dict[str, int] = {
    EMPTY: 1, VALID: 1, "syntax_domain": 1, "syntax_problem": 2, "unsupported_requirement": 2,
    "hallucinated_predicate": 20, "missing_init_fact": 0, "wrong_goal": 20, "broken_type_hierarchy": 9,
    "narrow_predicate_type": 9, "wrong_argument_type": 9, "missing_delete_effect": 4,
    "plan:swapped_args": 14, "plan:misordered_steps": 13, "plan:duplicated_step": 14, "plan:missing_steps": 1,
    "plan:trailing_steps": 15, STALE: 20}

PROFILES: dict[str, TeacherProfile] = {
    # a small reasoning model: reliable on the obvious (empty domain, valid plan, parser errors),
    # under half right on the look-alike semantic faults, verbose reasoning, slower
    "weaker": TeacherProfile(
        "weaker", "gpt-5-mini", quality=0.6, unparsable=0.06, latency_median_ms=4000.0, latency_sigma=0.5,
        reasoning_tokens_median=900.0, confusion=CONFUSION, systematic=0.7, accuracy={
            EMPTY: 0.95, VALID: 0.95, "syntax_domain": 0.85, "syntax_problem": 0.85, "unsupported_requirement": 0.75,
            "hallucinated_predicate": 0.6, "missing_init_fact": 0.4, "wrong_goal": 0.35,
            "broken_type_hierarchy": 0.55, "narrow_predicate_type": 0.45, "wrong_argument_type": 0.45,
            "missing_delete_effect": 0.3, "plan:swapped_args": 0.55, "plan:misordered_steps": 0.5,
            "plan:duplicated_step": 0.7, "plan:missing_steps": 0.4, "plan:trailing_steps": 0.5, STALE: 0.6}),
    # a stronger, faster model: usually right everywhere, its mistakes less concentrated
    "stronger": TeacherProfile(
        "stronger", "gemini-3-flash", quality=0.85, unparsable=0.02, latency_median_ms=2000.0, latency_sigma=0.4,
        reasoning_tokens_median=400.0, confusion=CONFUSION, systematic=0.5, accuracy={
            EMPTY: 0.99, VALID: 0.99, "syntax_domain": 0.95, "syntax_problem": 0.95, "unsupported_requirement": 0.9,
            "hallucinated_predicate": 0.85, "missing_init_fact": 0.75, "wrong_goal": 0.7,
            "broken_type_hierarchy": 0.85, "narrow_predicate_type": 0.8, "wrong_argument_type": 0.8,
            "missing_delete_effect": 0.65, "plan:swapped_args": 0.85, "plan:misordered_steps": 0.85,
            "plan:duplicated_step": 0.9, "plan:missing_steps": 0.75, "plan:trailing_steps": 0.85, STALE: 0.85}),
}
DEFAULT_PROFILE = "weaker"

# Which deterministic agent undoes each plan fault of the draft.
_PLAN_FAULT_AGENT = {"swapped_args": 13, "misordered_steps": 14, "duplicated_step": 15, "missing_steps": 17,
                     "trailing_steps": 16}

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
        return EMERGENCY_ID
    if cls == VALID:
        return NOOP_ID
    if cls.startswith("plan:"):
        return _PLAN_FAULT_AGENT[cls.removeprefix("plan:")]
    if cls == STALE:
        return GENERALIST_IDS[0]  # clean PDDL, stale plan: a rewrite makes the loop replan
    return CATALOG[cls].repaired_by[0]


def plausible_wrong(world: SimWorld, state: EpisodeState, right: int) -> list[int]:
    """Agents a prompted model could reasonably pick instead of `right`."""
    from rollout.policies.scripted import DEFAULT_RULES, symptom

    out: list[int] = []
    if world.faults:
        order = list(CATALOG)
        first = min(world.faults, key=lambda f: order.index(f.kind))
        out += CATALOG[first.kind].repaired_by[1:]
    out += DEFAULT_RULES.get(symptom(state), DEFAULT_RULES["unknown"])
    out += list(GENERALIST_IDS)
    seen: list[int] = []
    for a in out:
        if a != right and a not in seen and a not in (NOOP_ID, NATURAL_LANGUAGE_ID):
            seen.append(a)
    return seen or [a for a in range(NUM_AGENTS) if a not in (right, NOOP_ID, NATURAL_LANGUAGE_ID)]


class SimTeacherChat(CallLedger):
    """Implements `rollout.agents.base.ChatBackend` for the prompted teacher in the simulated world."""

    def __init__(self, profile: TeacherProfile, *, prices: PriceTable = SIM_TEACHER_PRICES) -> None:
        self.profile = profile.check()
        self.prices = prices
        self._records: list[CallRecord] = []

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
        p = self.profile
        text = self._answer(world, state, rng)
        tokens_in = sum(count_tokens(m.get("content", "")) + 4 for m in messages)
        reasoning = int(p.reasoning_tokens_median * math.exp(rng.gauss(0.0, 0.5)))
        tokens_out = count_tokens(text) + reasoning
        latency_ms = p.latency_median_ms * math.exp(rng.gauss(0.0, p.latency_sigma))
        delay = latency_ms / 1000.0 * world.config.latency_scale
        if delay > 0:
            await asyncio.sleep(delay)
        cost = self.prices.cost(p.model, tokens_in, tokens_out)
        self._records.append(CallRecord(purpose, self.model_name, prompt_sha256(messages), tokens_in, tokens_out,
                                        latency_ms, cost, "ok", 1, started))
        return ChatReply(text, tokens_in, tokens_out, latency_ms, cost, self.model_name, 1)

    def _answer(self, world: SimWorld, state: EpisodeState, rng: random.Random) -> str:
        p = self.profile
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


def make_sim_teacher_chat(params: dict[str, str]) -> SimTeacherChat:
    """From teacher spec parameters: profile=weaker|stronger, and overrides quality=, unparsable=."""
    name = params.get("profile", DEFAULT_PROFILE)
    if name not in PROFILES:
        raise ValueError(f"unknown sim teacher profile {name!r}; known: {', '.join(sorted(PROFILES))}")
    profile = PROFILES[name]
    try:
        if "quality" in params:  # one accuracy for every situation, no systematic confusion
            profile = replace(profile, quality=float(params["quality"]), accuracy={}, systematic=0.0)
        if "unparsable" in params:
            profile = replace(profile, unparsable=float(params["unparsable"]))
    except ValueError:
        raise ValueError("sim teacher quality/unparsable must be numbers in [0, 1]") from None
    return SimTeacherChat(profile)


__all__ = ["CONFUSION", "PROFILES", "SIM_TEACHER_PRICES", "SITUATIONS", "SimTeacherChat", "SimWorldMissing",
           "TeacherProfile", "count_tokens", "make_sim_teacher_chat", "repairing_agent", "situation"]

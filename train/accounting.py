"""The HALO paper's accounting of an episode, beside this product's own.

Rules (the paper's way, as stated for every table that uses them):

- iterations: refinement steps up to the end of the episode, without the steps that only
  finish it: the NoOp (agent 11) that stops on an accepted plan and the natural-language
  rendering after it (agent 12 chosen by the rule). A failed episode counts every step it ran.
- LLM calls per episode: the call that writes the first draft (AgentEmergency writes it in a
  real run; the simulated world drafts for free, so it is added here as one call), plus one
  call per orchestration decision made by a model (a trained policy's forward pass counts as
  one call; a prompted teacher counts the calls it made, its correction round included; rule
  decisions are free), plus one call per LLM agent run in the refinement steps. Deterministic
  agents and the final rendering are not counted.
- LLM calls a run pays (`paid_llm_calls`, the search benchmark's count, not the paper's): every
  recorded call, the final rendering and a search's acceptance checks included, plus the draft
  call where the simulated world drafted for free.
- cost per task, two conventions, orchestration only (the agents' LLM calls are the same for
  every orchestrator and the paper's per-task figures only fit the orchestrator's calls: $0.004
  for the trained policy's 2.2 calls):
  * paper: each orchestration call priced per call; a prompted teacher at its calibrated API
    price (rollout/sim/paper_calibration.py), a trained policy at the served model's amortised
    price per decision (same module);
  * ours: a prompted teacher at the same API price; a trained policy at its measured decision
    latency x the hardware price per hour.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from rollout.core.agent_table import AGENT_TABLE, AgentId
from rollout.core.trajectory import EpisodeRecord
from rollout.loop.report import refinement_steps
from rollout.sim.paper_calibration import served_usd_per_decision, teacher_usd_per_call

# the LLM agents of the refinement steps: 0-10 and 18-20, and the dynamic agent (an LLM with a written profile)
_LLM_KIND = frozenset(a.agent_id for a in AGENT_TABLE if a.kind == "llm")
LLM_AGENTS = (_LLM_KIND | {AgentId.DYNAMIC}) - {AgentId.NATURAL_LANGUAGE}
MODEL_DECIDERS = frozenset({"model", "student"})
DRAFT_CALLS = 1


@dataclass(frozen=True)
class Orchestrator:
    """Who decides, for pricing: 'prompted' (with a teacher profile), 'trained', or 'none'."""

    kind: str
    profile: str = "weaker"


@dataclass(frozen=True)
class PaperAccount:
    episodes: int
    oracle_success: float | None
    oracle_se: float | None
    validator_success: float
    iterations: float
    llm_calls: float
    decision_calls: float
    agent_calls: float
    usd_paper: float
    usd_ours: float

    def to_json(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def iterations(record: EpisodeRecord) -> int:
    steps = record.steps[:refinement_steps(record)]
    return sum(1 for s in steps if s.agent_id != AgentId.NOOP)


def episode_calls(record: EpisodeRecord) -> tuple[int, int]:
    """(orchestration decision calls, LLM agent calls) of one episode, by the paper's rule."""
    decisions = agents = 0
    for s in record.steps[:refinement_steps(record)]:
        agent = 1 if s.agent_id in LLM_AGENTS and s.llm_calls > 0 else 0
        agents += agent
        if s.is_hardcoded:
            continue
        decisions += 1 if s.decided_by in MODEL_DECIDERS else max(0, s.llm_calls - agent)
    return decisions, agents


def paid_llm_calls(record: EpisodeRecord) -> int:
    """The LLM calls a real run of the episode pays: its recorded calls (rendering included), plus
    the call that writes the first draft where the simulated world drafted it for free."""
    return record.total_llm_calls + (DRAFT_CALLS if record.llm_backend == "sim" else 0)


def _decision_seconds(records: list[EpisodeRecord]) -> float:
    return sum(s.decision_latency_ms for r in records for s in r.steps[:refinement_steps(r)]
               if not s.is_hardcoded and s.decided_by in MODEL_DECIDERS) / 1000.0


def account(records: list[EpisodeRecord], who: Orchestrator, usd_per_hour: float) -> PaperAccount:
    if not records:
        raise ValueError("no episodes to account for")
    n = len(records)
    calls = [episode_calls(r) for r in records]
    decisions = sum(d for d, _ in calls) / n
    agents = sum(a for _, a in calls) / n
    if who.kind == "prompted":
        usd_paper = usd_ours = decisions * teacher_usd_per_call(who.profile)
    elif who.kind == "trained":
        usd_paper = decisions * served_usd_per_decision()
        usd_ours = _decision_seconds(records) / 3600.0 * usd_per_hour / n
    else:
        usd_paper = usd_ours = 0.0
    graded = [r.success_oracle for r in records if r.success_oracle is not None]
    oracle = sum(graded) / len(graded) if graded else None
    se = math.sqrt(oracle * (1 - oracle) / len(graded)) if oracle is not None else None
    return PaperAccount(n, oracle, se, sum(r.success_validator for r in records) / n,
                        sum(iterations(r) for r in records) / n, DRAFT_CALLS + decisions + agents, decisions, agents,
                        usd_paper, usd_ours)

"""The promotion gate: a sequential test of the candidate against the serving model, with known error rates.

Both policies run the same held-out tasks with the same episode seeds in the same simulated world
(so each pair of episodes starts from the same draft), rules layer first, a batch of seeds at a
time. After every batch the gate updates anytime-valid one-sided bounds (cluster/loop/sequential.py)
on two paired differences: oracle success (candidate - serving, per episode in {-1, 0, 1}) and LLM
calls per episode. It decides:

- promote, better: the lower (1 - alpha/2) bound of the success difference is above 0;
- promote, cheaper and not worse: the upper (1 - alpha/2) bound of the calls difference is below
  -min_calls_saving and the lower bound of the success difference above -noninferiority_margin;
- keep, early: the upper (1 - beta) bound of the success difference is below min_effect (it is not
  the gain worth promoting) and the cheaper route cannot succeed (its calls bound is above
  -min_calls_saving, or its success bound below -noninferiority_margin);
- keep, undecided: max_episodes pairs spent without either answer.

A candidate that is neither better nor (cheaper and within the margin) is promoted with probability
at most alpha/2 + alpha/2 = alpha whenever the gate stops (Ville's inequality, union over the two
routes). Episodes that failed for infrastructure reasons are dropped from both sides and counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cluster.loop.config import GateConfig
from cluster.loop.sequential import BettingBound
from rollout.core.trajectory import EpisodeRecord
from rollout.tasks.base import Task

Pair = tuple[EpisodeRecord, EpisodeRecord]  # (candidate, serving), same task and seed


@dataclass(frozen=True)
class Score:
    episodes: int
    oracle_success: float  # over episodes with a gold answer
    validator_success: float
    llm_calls_per_episode: float
    steps_per_episode: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(episodes: list[EpisodeRecord]) -> Score:
    if not episodes:
        raise ValueError("no gate episodes to score")
    gold = [e for e in episodes if e.success_oracle is not None]
    n = len(episodes)
    return Score(episodes=n,
                 oracle_success=sum(bool(e.success_oracle) for e in gold) / len(gold) if gold else 0.0,
                 validator_success=sum(e.success_validator for e in episodes) / n,
                 llm_calls_per_episode=sum(e.total_llm_calls for e in episodes) / n,
                 steps_per_episode=sum(e.num_steps for e in episodes) / n)


def infra_failed(record: EpisodeRecord) -> bool:
    """An episode that ended on an infrastructure failure: not an outcome of the policy."""
    return bool(getattr(record, "infra_error", "") or record.error)


def calls_scale(max_steps: int) -> float:
    """A bound on one episode's LLM calls (an agent call and an orchestrator call per step, the final
    rendering): the calls difference divided by it lies in [-1, 1]."""
    return 2.0 * (max_steps + 1)


@dataclass
class SequentialState:
    """The gate's running bounds over the pairs seen so far."""

    config: GateConfig
    scale: float
    success_low: BettingBound = field(init=False)  # lower, alpha/2: promote (better / not worse)
    success_high: BettingBound = field(init=False)  # upper, alpha/2: the interval shown
    success_futile: BettingBound = field(init=False)  # upper, beta: keep early
    calls_high: BettingBound = field(init=False)  # upper, alpha/2: cheaper
    calls_futile: BettingBound = field(init=False)  # lower, beta: the cheaper route cannot succeed
    pairs: int = 0
    infra_failures: int = 0
    ungraded: int = 0

    def __post_init__(self) -> None:
        a, b = self.config.alpha / 2, self.config.beta
        self.success_low, self.success_high = BettingBound("lower", a), BettingBound("upper", a)
        self.success_futile = BettingBound("upper", b)
        self.calls_high, self.calls_futile = BettingBound("upper", a), BettingBound("lower", b)

    def add(self, pairs: list[Pair]) -> None:
        success, calls = [], []
        for cand, serv in pairs:
            if infra_failed(cand) or infra_failed(serv):
                self.infra_failures += 1
                continue
            if cand.success_oracle is None or serv.success_oracle is None:
                self.ungraded += 1
                continue
            success.append(float(cand.success_oracle) - float(serv.success_oracle))
            diff = (cand.total_llm_calls - serv.total_llm_calls) / self.scale
            calls.append(min(1.0, max(-1.0, diff)))
        for bound in (self.success_low, self.success_high, self.success_futile):
            bound.update(success)
        for bound in (self.calls_high, self.calls_futile):
            bound.update(calls)
        self.pairs += len(success)

    def decision(self) -> tuple[str, str] | None:
        """(promote|keep, why) once the answer is clear, else None."""
        cfg = self.config
        saving = -cfg.min_calls_saving / self.scale
        if self.success_low.bound > 0:
            return "promote", "better: the lower bound of the oracle-success difference is above 0"
        cheaper = self.calls_high.bound < saving
        if cheaper and self.success_low.bound > -cfg.noninferiority_margin:
            return "promote", (f"cheaper by at least {cfg.min_calls_saving:g} LLM calls/episode and oracle success "
                               f"not below by more than {cfg.noninferiority_margin:g}")
        cheap_route_dead = self.calls_futile.bound > saving or self.success_high.bound < -cfg.noninferiority_margin
        if self.success_futile.bound < cfg.min_effect and cheap_route_dead:
            return "keep", (f"not better by {cfg.min_effect:g} (upper bound {self.success_futile.bound:+.3f}) "
                            "and not cheaper-and-non-inferior")
        return None

    def summary(self) -> dict[str, Any]:
        """Estimate and (1 - alpha) interval of each difference, in the units shown (share, calls)."""
        return {"pairs": self.pairs, "infra_failures": self.infra_failures, "ungraded": self.ungraded,
                "success_diff": self.success_low.mean, "success_low": self.success_low.bound,
                "success_high": self.success_high.bound, "calls_diff": self.calls_high.mean * self.scale,
                "calls_low": self.calls_futile.bound * self.scale, "calls_high": self.calls_high.bound * self.scale,
                "confidence": 1 - self.config.alpha}


@dataclass
class GateResult:
    promote: bool
    reasons: list[str]
    sequential: dict[str, Any]
    candidate: Score | None = None
    serving: Score | None = None
    batches: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"decision": "promote" if self.promote else "keep", "reasons": self.reasons,
                "sequential": self.sequential, "batches": self.batches,
                "candidate": self.candidate.to_dict() if self.candidate else None,
                "serving": self.serving.to_dict() if self.serving else None}


def run_sequential_gate(next_batch: Callable[[int], list[Pair]], gate: GateConfig, *, max_steps: int = 10,
                        ) -> tuple[GateResult, list[Pair]]:
    """Ask `next_batch(k)` for the k-th batch of pairs until the test decides or the budget is spent."""
    state = SequentialState(gate, calls_scale(max_steps))
    seen: list[Pair] = []
    verdict: tuple[str, str] | None = None
    k = 0
    while len(seen) < gate.max_episodes:
        batch = next_batch(k)[: gate.max_episodes - len(seen)]
        k += 1
        if not batch:
            break
        seen += batch
        state.add(batch)
        verdict = state.decision()
        if verdict is not None or gate.mode == "always":
            break
    if gate.mode == "always":
        verdict = ("promote", "gate.mode always: promoted without a test")
    elif verdict is None:
        verdict = ("keep", f"undecided after {state.pairs} graded pairs (gate.max_episodes {gate.max_episodes})")
    scores = [score([p[i] for p in seen]) if seen else None for i in (0, 1)]
    result = GateResult(verdict[0] == "promote", [verdict[1]], state.summary(), scores[0], scores[1], k)
    return result, seen


def run_gate_episodes(model_dir: Path, tasks: list[Task], *, seeds: list[int], run_id: str, max_steps: int,
                      llm: str, concurrency: int = 4) -> list[EpisodeRecord]:
    """Episodes of the rules-first policy in `model_dir` on `tasks` x `seeds` (in this process), in the
    world `llm` names (a sim spec's world file applies here too)."""
    from rollout.llm.spec import LLMSpec
    from rollout.loop.backends import agent_backend_for
    from rollout.loop.episode import EpisodeConfig, run_episode
    from train.policies import load_policy

    agents = agent_backend_for(LLMSpec.parse(llm), pool=None)  # the LLM client's own connection limit
    policy = load_policy(model_dir, rules_first=True)

    async def all_episodes() -> list[EpisodeRecord]:
        sem = asyncio.Semaphore(concurrency)

        async def one(task: Task, seed: int) -> EpisodeRecord:
            async with sem:
                config = EpisodeConfig(max_steps=max_steps, seed=seed, run_id=run_id, backend=agents)
                return await run_episode(task, policy, config)

        return list(await asyncio.gather(*[one(t, s) for t in tasks for s in seeds]))

    try:
        return asyncio.run(all_episodes())
    finally:
        policy.close()


def pair_up(candidate: list[EpisodeRecord], serving: list[EpisodeRecord]) -> list[Pair]:
    """Pairs by (task, seed), in a fixed order (never the outcomes' order)."""
    by_key = {(r.task_id, r.seed): r for r in serving}
    pairs = [(c, by_key[(c.task_id, c.seed)]) for c in candidate if (c.task_id, c.seed) in by_key]
    return sorted(pairs, key=lambda p: (p[0].seed, p[0].task_id))

"""The promotion gate: candidate against the serving model on the fixed held-out tasks.

Both policies run in the same process, on the same tasks with the same episode seeds (so the
simulated world drafts the same faults for both), rules layer first. The candidate is promoted
only if it is not worse than the serving model on oracle success and on LLM calls per episode,
within the configured thresholds; otherwise the serving model stays and the reasons are recorded.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cluster.loop.config import GateConfig
from rollout.tasks.base import Task
from rollout.trajectory import EpisodeRecord


@dataclass(frozen=True)
class Score:
    episodes: int
    oracle_success: float  # over episodes with a gold answer
    validator_success: float
    llm_calls_per_episode: float
    steps_per_episode: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GateResult:
    candidate: Score
    serving: Score
    promote: bool
    reasons: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate.to_dict(), "serving": self.serving.to_dict(),
                "decision": "promote" if self.promote else "keep", "reasons": self.reasons}


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


def decide(candidate: Score, serving: Score, gate: GateConfig) -> GateResult:
    reasons = []
    d_success = candidate.oracle_success - serving.oracle_success
    d_calls = candidate.llm_calls_per_episode - serving.llm_calls_per_episode
    if d_success < gate.min_oracle_success_delta:
        reasons.append(f"oracle success {candidate.oracle_success:.3f} vs serving {serving.oracle_success:.3f} "
                       f"(delta {d_success:+.3f} < {gate.min_oracle_success_delta:+.3f})")
    if d_calls > gate.max_llm_calls_delta:
        reasons.append(f"LLM calls/episode {candidate.llm_calls_per_episode:.2f} vs serving "
                       f"{serving.llm_calls_per_episode:.2f} (delta {d_calls:+.2f} > {gate.max_llm_calls_delta:+.2f})")
    if not reasons:
        reasons.append(f"not worse: oracle success {d_success:+.3f}, LLM calls/episode {d_calls:+.2f}")
    return GateResult(candidate, serving, promote=len(reasons) == 1 and reasons[0].startswith("not worse"),
                      reasons=reasons)


def run_gate_episodes(model_dir: Path, tasks: list[Task], *, seeds: list[int], run_id: str, max_steps: int,
                      llm: str, concurrency: int = 4) -> list[EpisodeRecord]:
    """Episodes of the rules-first policy in `model_dir` on `tasks` x `seeds` (in this process)."""
    from rollout.backends import LLMAgents, SimAgents
    from rollout.driver.worker import parse_llm_spec
    from rollout.episode import EpisodeConfig, run_episode
    from train.policies import load_policy

    backend, model, base_url = parse_llm_spec(llm)
    # The gate's simulated world is the default one (sim parameters of the spec do not apply here).
    agents: SimAgents | LLMAgents = SimAgents()
    if model is not None:
        from rollout.llm import OpenAIChatClient, config_from_env

        agents = LLMAgents(backend, OpenAIChatClient(config_from_env(model, base_url)))
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

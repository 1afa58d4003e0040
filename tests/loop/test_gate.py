"""The gate promotes only a candidate that is not worse, judged on real held-out episodes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from cluster.loop.config import GateConfig
from cluster.loop.gate import Score, decide, run_gate_episodes, score
from rollout.episode import EpisodeConfig, run_episodes
from rollout.policies import make_policy
from rollout.tasks import load_tasks
from train.fast_policy import WEIGHTS_FILE, train_fast_policy
from train.manifest import Manifest

pytestmark = pytest.mark.timeout(300)


def _score(oracle: float, calls: float) -> Score:
    return Score(episodes=10, oracle_success=oracle, validator_success=oracle, llm_calls_per_episode=calls,
                 steps_per_episode=3.0)


@pytest.mark.parametrize("cand, serv, gate, promote, reason", [
    (_score(0.8, 2.0), _score(0.8, 2.0), GateConfig(), True, "not worse"),
    (_score(0.9, 1.5), _score(0.8, 2.0), GateConfig(), True, "not worse"),
    (_score(0.7, 2.0), _score(0.8, 2.0), GateConfig(), False, "oracle success 0.700 vs serving 0.800"),
    (_score(0.8, 2.5), _score(0.8, 2.0), GateConfig(), False, "LLM calls/episode 2.50 vs serving 2.00"),
    (_score(0.7, 2.5), _score(0.8, 2.0), GateConfig(min_oracle_success_delta=-0.2, max_llm_calls_delta=1.0),
     True, "not worse"),
    (_score(0.85, 2.0), _score(0.8, 2.0), GateConfig(min_oracle_success_delta=0.1), False, "delta +0.050 < +0.100"),
])
def test_decision_rule(cand: Score, serv: Score, gate: GateConfig, promote: bool, reason: str) -> None:
    result = decide(cand, serv, gate)
    assert result.promote is promote
    assert any(reason in r for r in result.reasons), result.reasons
    assert result.to_dict()["decision"] == ("promote" if promote else "keep")


def test_scores_count_oracle_over_gold_episodes_only() -> None:
    with pytest.raises(ValueError, match="no gate episodes"):
        score([])


def _constant_candidate(model_dir: Path, like: Path, agent_id: int) -> None:
    """A badly trained candidate in the fast-policy format: it always picks one agent."""
    manifest = Manifest.load(like)
    model_dir.mkdir(parents=True)
    bias = np.full(21, -5.0, dtype=np.float32)
    bias[agent_id] = 5.0
    np.savez_compressed(model_dir / WEIGHTS_FILE, buckets=np.zeros(0, dtype=np.int64),
                        weights=np.zeros((0, 21), dtype=np.float32), bias=bias,
                        n_buckets=np.int64(manifest.extra["n_buckets"]))
    manifest.version = "constant-12"
    manifest.save(model_dir)


def test_a_worse_candidate_is_kept_out_with_the_reason(tmp_path: Path) -> None:
    tasks = load_tasks("planbench:blocksworld:10")
    train_tasks, holdout = tasks[3:], tasks[:3]
    teacher = asyncio.run(run_episodes(train_tasks, make_policy("rules+scripted", seed=0),
                                       EpisodeConfig(seed=0, run_id="teacher"), concurrency=4))
    train_fast_policy(teacher, tmp_path / "serving", check="oracle")
    # Agent 12 renders the plan in natural language; it repairs nothing.
    _constant_candidate(tmp_path / "candidate", tmp_path / "serving", agent_id=12)
    seeds = [7, 8]
    serving = score(run_gate_episodes(tmp_path / "serving", holdout, seeds=seeds, run_id="gate-serving",
                                      max_steps=10, llm="sim"))
    candidate_eps = run_gate_episodes(tmp_path / "candidate", holdout, seeds=seeds, run_id="gate-candidate",
                                      max_steps=10, llm="sim")
    assert all(e.llm_backend == "sim" for e in candidate_eps)
    candidate = score(candidate_eps)
    assert serving.episodes == candidate.episodes == 6
    assert candidate.oracle_success < serving.oracle_success
    result = decide(candidate, serving, GateConfig())
    assert not result.promote and "oracle success" in result.reasons[0]

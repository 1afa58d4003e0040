"""The promotion gate: a sequential test with known error rates, on synthetic pairs and on real
held-out episodes; infrastructure failures are excluded from both sides and counted."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import numpy as np
import pytest

from cluster.loop.config import GateConfig
from cluster.loop.gate import pair_up, run_gate_episodes, run_sequential_gate, score
from cluster.loop.sequential import BettingBound
from cluster.loop.status import CycleRow, format_table, plot
from rollout.core.trajectory import EpisodeRecord
from rollout.loop.episode import EpisodeConfig, run_episodes
from rollout.policies import make_policy
from rollout.tasks import load_tasks
from train.fast_policy import WEIGHTS_FILE, train_fast_policy
from train.manifest import Manifest

pytestmark = pytest.mark.timeout(300)


def _ep(task: int, seed: int, ok: bool, calls: int = 4, error: str = "") -> EpisodeRecord:
    return EpisodeRecord(f"e{task}-{seed}", "r", f"t{task}", "planbench", "d", "p", "1", "sim", ok, ok,
                         seed=seed, total_llm_calls=calls, error=error)


def _source(p_cand: float, p_serv: float, rng: random.Random, *, cand_calls: int = 4, batch: int = 20,
            shared: float = 0.8):
    """Batches of pairs: with probability `shared` both episodes of a pair share one draw (they start
    from the same draft), so the pair is discordant less often than independent episodes would be."""
    def next_batch(k: int) -> list:
        pairs = []
        for i in range(batch):
            u = rng.random()
            if rng.random() < shared:
                c, s = u < p_cand, u < p_serv
            else:
                c, s = rng.random() < p_cand, rng.random() < p_serv
            pairs.append((_ep(i, k, c, cand_calls), _ep(i, k, s)))
        return pairs
    return next_batch


@pytest.mark.parametrize("p_cand, promoted_at_most, promoted_at_least", [
    (0.80, 0.05, 0.0),  # equal: false promotion <= alpha
    (0.75, 0.05, 0.0),  # 5 points worse
    (0.88, 1.0, 0.8),  # 8 points better: power
])
def test_error_rates_on_synthetic_pairs(p_cand: float, promoted_at_most: float, promoted_at_least: float) -> None:
    rng = random.Random(7)
    gate = GateConfig(max_episodes=800)
    promoted = [run_sequential_gate(_source(p_cand, 0.80, rng), gate)[0].promote for _ in range(60)]
    share = sum(promoted) / len(promoted)
    assert promoted_at_least <= share <= promoted_at_most, share


def test_a_clearly_worse_candidate_is_kept_early_with_its_interval() -> None:
    result, seen = run_sequential_gate(_source(0.5, 0.9, random.Random(1)), GateConfig(max_episodes=800))
    assert not result.promote and "not better" in result.reasons[0]
    assert len(seen) < 200  # stopped well before the budget
    q = result.sequential
    assert q["success_low"] <= q["success_diff"] <= q["success_high"] < 0
    assert result.candidate.oracle_success < result.serving.oracle_success


def test_a_cheaper_candidate_within_the_margin_is_promoted() -> None:
    gate = GateConfig(max_episodes=800)
    result, _ = run_sequential_gate(_source(0.8, 0.8, random.Random(2), cand_calls=2, shared=1.0), gate)
    assert result.promote and "cheaper" in result.reasons[0]
    assert result.sequential["calls_high"] < -gate.min_calls_saving


def test_an_undecided_gate_keeps_the_serving_model() -> None:
    result, seen = run_sequential_gate(_source(0.8, 0.8, random.Random(3)), GateConfig(max_episodes=40))
    assert not result.promote and "undecided" in result.reasons[0] and len(seen) == 40


def test_infrastructure_failures_are_dropped_from_both_sides_and_counted() -> None:
    def next_batch(k: int) -> list:
        broken = _ep(0, k, False, error="sandbox: worker died")
        return [(broken, _ep(0, k, True)), (_ep(1, k, True), _ep(1, k, False))]
    result, _ = run_sequential_gate(next_batch, GateConfig(max_episodes=10))
    assert result.sequential["infra_failures"] == 5 and result.sequential["pairs"] == 5
    assert result.sequential["success_diff"] == 1.0  # the failed episode counts on neither side


def test_infra_error_attribute_counts_too() -> None:
    cand = _ep(0, 0, False)
    cand.infra_error = "llm_unavailable"  # the attribute a later release adds to EpisodeRecord
    result, _ = run_sequential_gate(lambda k: [(cand, _ep(0, k, True))] if k == 0 else [], GateConfig())
    assert result.sequential["infra_failures"] == 1 and result.sequential["pairs"] == 0 and not result.promote


def test_mode_always_promotes_after_one_batch() -> None:
    result, seen = run_sequential_gate(_source(0.2, 0.9, random.Random(4)), GateConfig(mode="always"))
    assert result.promote and result.batches == 1 and len(seen) == 20


def test_bounds_cover_the_mean_at_every_look() -> None:
    rng = np.random.default_rng(5)
    misses = 0
    for _ in range(100):
        low, high = BettingBound("lower", 0.05), BettingBound("upper", 0.05)
        x = rng.choice([-1.0, 0.0, 1.0], p=[0.1, 0.7, 0.2], size=300)  # mean 0.1
        for i in range(0, 300, 10):
            low.update(list(x[i:i + 10]))
            high.update(list(x[i:i + 10]))
            if low.bound > 0.1 or high.bound < 0.1:
                misses += 1
                break
    assert misses <= 10  # each side errs with probability <= 5% over all 30 looks
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        BettingBound("lower", 0.05).update([2.0])


def test_status_table_and_plot_show_the_interval(tmp_path: Path) -> None:
    row = CycleRow(1, "done", cand_oracle=0.9, serv_oracle=0.8, cand_calls=4.0, serv_calls=4.5, decision="promote",
                   diff=0.1, low=0.02, high=0.18, pairs=120, candidate="v2-abc")
    text = format_table({"serving": {"version": "v1"}, "holdout_task_ids": ["a"]}, [row])
    assert "+10.0 [+2.0, +18.0] (120)" in text
    assert plot([row], tmp_path / "loop.png", "loop").stat().st_size > 1000


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


def test_a_worse_candidate_is_kept_out_on_real_episodes(tmp_path: Path) -> None:
    tasks = load_tasks("planbench:blocksworld:10")
    train_tasks, holdout = tasks[3:], tasks[:3]
    teacher = asyncio.run(run_episodes(train_tasks, make_policy("rules+scripted", seed=0),
                                       EpisodeConfig(seed=0, run_id="teacher"), concurrency=4))
    train_fast_policy(teacher, tmp_path / "serving", check="oracle")
    # Agent 12 renders the plan in natural language; it repairs nothing.
    _constant_candidate(tmp_path / "candidate", tmp_path / "serving", agent_id=12)

    def next_batch(k: int) -> list:
        seeds = [7 + 2 * k, 8 + 2 * k]
        got = {role: run_gate_episodes(tmp_path / role, holdout, seeds=seeds, run_id=f"gate-{role}", max_steps=10,
                                       llm="sim") for role in ("candidate", "serving")}
        assert all(e.llm_backend == "sim" for e in got["candidate"])
        return pair_up(got["candidate"], got["serving"])

    result, seen = run_sequential_gate(next_batch, GateConfig(max_episodes=60))
    assert not result.promote
    assert all(c.task_id == s.task_id and c.seed == s.seed for c, s in seen)
    assert score([c for c, _ in seen]).oracle_success < score([s for _, s in seen]).oracle_success
    assert "not better" in result.reasons[0] and len(seen) < 60  # stopped early, before the budget
    q = result.sequential
    assert q["success_low"] <= q["success_diff"] < 0 and q["success_high"] < 0.05 and q["pairs"] == len(seen)


def test_scores_need_episodes() -> None:
    with pytest.raises(ValueError, match="no gate episodes"):
        score([])

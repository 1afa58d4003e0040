"""The RL update of the fast policy (train/rl.py): rewards, the group baseline, infrastructure
exclusion, the gradient, the pull towards the supervised start, checkpoints and resuming."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rollout.core.agent_table import NUM_AGENTS
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord
from train.rl import (
    Batch,
    Checkpoint,
    LinearWeights,
    PolicyStep,
    RLError,
    Scored,
    batch_diagnostics,
    batch_steps,
    episode_reward,
    group_advantages,
    latest_checkpoint,
    mean_kl,
    policy_gradient,
    rl_update,
    save_checkpoint,
    softmax,
    surrogate_gradient,
)


def _state(nl: str = "stack the red block on the blue one") -> EpisodeState:
    return EpisodeState(task_description=nl)


def _record(eid: str, *, oracle: bool | None, validator: bool = False, calls: int = 0, agent: int = 3,
            decided_by: str = "model", infra: str = "", error: str = "", state: EpisodeState | None = None
            ) -> EpisodeRecord:
    step = StepRecord(step=0, state_json=(state or _state()).to_json(), agent_id=agent, agent_name="x",
                      decided_by=decided_by, is_hardcoded=decided_by == "rule")
    return EpisodeRecord(episode_id=eid, run_id="t", task_id="task", family="f", domain_name="d", policy_name="p",
                         policy_version="0", llm_backend="sim", success_validator=validator, success_oracle=oracle,
                         steps=[step], total_llm_calls=calls, infra_error=infra, error=error)


def _params(seed: int = 0, n: int = 0) -> LinearWeights:
    rng = np.random.default_rng(seed)
    ids = sorted(set(LinearWeights(np.zeros(0, dtype=np.int64), np.zeros((0, NUM_AGENTS)), np.zeros(NUM_AGENTS))
                     .bucket_ids(_state())))
    buckets = np.array(ids[: n or len(ids)], dtype=np.int64)
    return LinearWeights(buckets, rng.normal(size=(len(buckets), NUM_AGENTS)), rng.normal(size=NUM_AGENTS))


def test_reward_is_oracle_success_minus_call_price_and_validator_without_gold():
    assert episode_reward(_record("a", oracle=True, calls=5), 0.02) == pytest.approx(0.9)
    assert episode_reward(_record("b", oracle=False, validator=True, calls=1), 0.1) == pytest.approx(-0.1)
    assert episode_reward(_record("c", oracle=None, validator=True, calls=0), 0.1) == pytest.approx(1.0)


def test_group_baseline_is_the_groups_mean_and_infra_failures_are_excluded_and_counted():
    eps = [("g1", _record("a", oracle=True)), ("g1", _record("b", oracle=False)),
           ("g1", _record("c", oracle=False)), ("g1", _record("i", oracle=True, infra="endpoint down")),
           ("g2", _record("d", oracle=True, calls=10)), ("g2", _record("e", oracle=True)),
           ("g2", _record("x", oracle=False, error="Traceback: bug")), ("g3", _record("f", oracle=True))]
    batch = group_advantages(eps, price_per_call=0.01)
    adv = {s.record.episode_id: s.advantage for s in batch.scored}
    assert batch.infra_excluded == 1 and batch.broken_excluded == 1
    assert set(adv) == {"a", "b", "c", "d", "e", "f"}  # the infra and broken episodes get no reward
    assert adv["a"] == pytest.approx(2 / 3) and adv["b"] == pytest.approx(-1 / 3)  # mean of g1 is 1/3 (not 1/2)
    assert adv["d"] == pytest.approx(-0.05) and adv["e"] == pytest.approx(0.05)
    assert adv["f"] == 0.0  # alone in its group: no baseline, no signal
    assert sum(adv.values()) == pytest.approx(0.0)


def test_gradient_matches_finite_differences_of_the_advantage_weighted_log_likelihood():
    params = _params(1)
    state = _state()
    batch = Batch([Scored(_record("a", oracle=True, agent=2, state=state), "g", 1.0, advantage=0.7),
                   Scored(_record("b", oracle=False, agent=5, state=state), "g", 0.0, advantage=-0.4),
                   Scored(_record("r", oracle=False, agent=9, decided_by="rule", state=state), "g", 0.0,
                          advantage=-0.3)])  # a rule step is not the policy's: no gradient
    temperature = 0.8

    def objective(bias: np.ndarray) -> float:
        p = LinearWeights(params.buckets, params.weights, bias, params.n_buckets)
        logp = np.log(softmax(p.scores(p.rows(p.bucket_ids(state))) / temperature))
        return (0.7 * logp[2] - 0.4 * logp[5]) / 3

    _, _, grad_b = policy_gradient(params, batch, temperature)
    eps = 1e-6
    unit = np.eye(NUM_AGENTS)
    numeric = [(objective(params.bias + eps * unit[k]) - objective(params.bias - eps * unit[k])) / (2 * eps)
               for k in range(NUM_AGENTS)]
    np.testing.assert_allclose(grad_b, numeric, atol=1e-6)


def test_a_positive_advantage_makes_its_agent_likelier_and_new_buckets_get_rows():
    params = _params(2, n=3)  # only 3 of the state's buckets have a row; the update adds the rest
    state = _state()
    batch = Batch([Scored(_record("a", oracle=True, agent=4, state=state), "g", 1.0, advantage=0.5)])
    after = rl_update(params, params, batch, lr=0.5, pull=0.0, temperature=1.0)
    p_before = softmax(params.scores(params.rows(params.bucket_ids(state))))[4]
    p_after = softmax(after.scores(after.rows(after.bucket_ids(state))))[4]
    assert p_after > p_before
    assert len(after.buckets) == len(set(params.bucket_ids(state))) > 3


def test_the_pull_draws_the_weights_back_towards_the_supervised_start():
    start = _params(3)
    moved = LinearWeights(start.buckets, start.weights + 1.0, start.bias - 2.0, start.n_buckets)
    after = rl_update(moved, start, Batch(), lr=0.5, pull=0.4, temperature=1.0)  # no episodes: only the pull
    np.testing.assert_allclose(after.weights - start.weights, 0.8 * 1.0)  # (1 - lr * pull) of the distance
    np.testing.assert_allclose(after.bias - start.bias, 0.8 * -2.0)
    still = rl_update(moved, start, Batch(), lr=0.5, pull=0.0, temperature=1.0)
    np.testing.assert_allclose(still.weights, moved.weights)


def test_checkpoints_resume_from_the_last_complete_iteration_and_refuse_other_settings(tmp_path):
    settings = {"lr": 0.5, "iterations": 4, "pull": 0.1}
    assert latest_checkpoint(tmp_path, settings) is None
    for i in (1, 2):
        p = _params(i)
        save_checkpoint(tmp_path, Checkpoint(i, p, [{"iteration": float(i)}] * i, settings))
    # a checkpoint killed mid-write leaves a temporary file (or weights without their .json): ignored
    (tmp_path / "rl_checkpoints" / ".tmp-00003.npz").write_bytes(b"partial")
    _params(9).save(tmp_path / "rl_checkpoints" / "iter-00003.npz")
    ckpt = latest_checkpoint(tmp_path, {**settings, "iterations": 10})  # more iterations: allowed
    assert ckpt is not None and ckpt.iteration == 2 and len(ckpt.history) == 2
    np.testing.assert_array_equal(ckpt.params.weights, _params(2).weights)  # float64: exact
    with pytest.raises(RLError, match="other settings \\(lr\\)"):
        latest_checkpoint(tmp_path, {**settings, "lr": 0.1})
    meta = json.loads((tmp_path / "rl_checkpoints" / "iter-00002.json").read_text())
    assert meta["iteration"] == 2 and not math.isnan(meta["history"][0]["iteration"])
    # a checkpoint from before a setting existed resumes at the value runs had then, and only at it
    assert latest_checkpoint(tmp_path, {**settings, "exit_calls": 20}) is not None
    with pytest.raises(RLError, match="other settings \\(exit_calls\\)"):
        latest_checkpoint(tmp_path, {**settings, "exit_calls": 40})


def test_advantages_normalised_by_the_groups_or_the_batchs_spread_keep_equal_groups_at_zero():
    eps = [("g1", _record("a", oracle=True)), ("g1", _record("b", oracle=False)),
           ("g2", _record("c", oracle=True, calls=10)), ("g2", _record("d", oracle=True)),
           ("g3", _record("e", oracle=False)), ("g3", _record("f", oracle=False))]
    group = {s.record.episode_id: s.advantage for s in group_advantages(eps, 0.01, norm="group").scored}
    assert group["a"] == pytest.approx(1.0) and group["b"] == pytest.approx(-1.0)
    assert group["c"] == pytest.approx(-1.0) and group["d"] == pytest.approx(1.0)  # a call-only spread counts fully
    assert group["e"] == group["f"] == 0.0
    batch = {s.record.episode_id: s.advantage for s in group_advantages(eps, 0.01, norm="batch").scored}
    raw = np.array([0.5, -0.5, -0.05, 0.05, 0.0, 0.0])
    np.testing.assert_allclose([batch[k] for k in "abcdef"], raw / np.sqrt((raw ** 2).mean()))
    with pytest.raises(RLError, match="one of none, group, batch"):
        group_advantages(eps, 0.01, norm="zscore")


def _moved_steps(clip_ratio_high: bool = False) -> tuple[LinearWeights, list[PolicyStep]]:
    """The batch's steps under a sampling policy, and a policy moved away from it (ratio != 1)."""
    old = _params(4)
    state = _state()
    batch = Batch([Scored(_record("a", oracle=True, agent=2, state=state), "g", 1.0, advantage=0.8),
                   Scored(_record("b", oracle=False, agent=6, state=state), "g", 0.0, advantage=-0.5)])
    old, steps = batch_steps(old, batch, 0.9)
    shift = np.zeros(NUM_AGENTS)
    shift[2], shift[6] = (0.1, -0.05) if not clip_ratio_high else (3.0, 0.0)
    return LinearWeights(old.buckets, old.weights, old.bias + shift, old.n_buckets), steps


def test_the_clipped_surrogate_with_entropy_bonus_matches_finite_differences_off_the_sampling_policy():
    params, steps = _moved_steps()
    temperature, clip, entropy = 0.9, 0.5, 0.3

    def objective(bias: np.ndarray) -> float:
        total = 0.0
        for st in steps:
            logp = np.log(softmax((bias + params.weights[st.rows].sum(axis=0)) / temperature))
            ratio = np.exp(logp[st.agent] - st.old_logp)
            total += min(ratio * st.advantage, np.clip(ratio, 1 - clip, 1 + clip) * st.advantage)
            total += entropy * float(-(np.exp(logp) * logp).sum())
        return total / 2

    _, grad_b = surrogate_gradient(params, steps, 2, temperature, clip=clip, entropy=entropy)
    unit, eps = np.eye(NUM_AGENTS), 1e-6
    numeric = [(objective(params.bias + eps * unit[k]) - objective(params.bias - eps * unit[k])) / (2 * eps)
               for k in range(NUM_AGENTS)]
    np.testing.assert_allclose(grad_b, numeric, atol=1e-6)


def test_a_step_whose_ratio_left_the_clip_range_in_its_advantages_direction_gives_no_gradient():
    params, steps = _moved_steps(clip_ratio_high=True)  # agent 2 (advantage > 0) became far likelier
    _, unclipped = surrogate_gradient(params, steps[:1], 1, 0.9)
    _, clipped = surrogate_gradient(params, steps[:1], 1, 0.9, clip=0.2)
    assert np.abs(unclipped).max() > 0 and np.abs(clipped).max() == 0.0


def test_more_epochs_move_the_policy_further_and_one_epoch_is_the_reinforce_step():
    params = _params(5)
    state = _state()
    batch = Batch([Scored(_record("a", oracle=True, agent=4, state=state), "g", 1.0, advantage=0.5),
                   Scored(_record("b", oracle=False, agent=1, state=state), "g", 0.0, advantage=-0.5)])
    _, grad_w, grad_b = policy_gradient(params, batch, 1.0)
    one = rl_update(params, params, batch, lr=0.01, pull=0.0, temperature=1.0, clip=0.2)
    np.testing.assert_allclose(one.bias, params.bias + 0.01 * grad_b)
    four = rl_update(params, params, batch, lr=0.01, pull=0.0, temperature=1.0, epochs=4, clip=0.2)

    def p4(w: LinearWeights) -> float:
        return float(softmax(w.scores(w.rows(w.bucket_ids(state))))[4])

    assert p4(params) < p4(one) < p4(four)


def test_batch_diagnostics_count_model_steps_entropy_and_the_groups_that_carry_signal():
    params = LinearWeights(np.zeros(0, dtype=np.int64), np.zeros((0, NUM_AGENTS)), np.zeros(NUM_AGENTS))
    eps = [("g1", _record("a", oracle=True)), ("g1", _record("b", oracle=False, decided_by="rule")),
           ("g2", _record("c", oracle=True)), ("g2", _record("d", oracle=True))]
    figures = batch_diagnostics(params, group_advantages(eps, 0.0), 1.0)
    assert figures["model_steps"] == pytest.approx(3 / 4)  # the rule step is not the model's
    assert figures["entropy"] == pytest.approx(math.log(NUM_AGENTS))  # all-zero scores: uniform
    assert figures["informative_groups"] == pytest.approx(0.5)


def test_the_trust_region_halves_a_step_until_the_mean_kl_from_the_sampling_policy_is_within_it():
    params = _params(6)
    state = _state()
    batch = Batch([Scored(_record("a", oracle=True, agent=4, state=state), "g", 1.0, advantage=1.0),
                   Scored(_record("b", oracle=False, agent=1, state=state), "g", 0.0, advantage=-1.0)])
    _, steps = batch_steps(params, batch, 1.0)
    free = rl_update(params, params, batch, lr=5.0, pull=0.0, temperature=1.0, epochs=3)
    bounded = rl_update(params, params, batch, lr=5.0, pull=0.0, temperature=1.0, epochs=3, max_kl=0.05)
    assert mean_kl(free, steps, 1.0) > 0.05 >= mean_kl(bounded, steps, 1.0) > 0.05 / 4  # halved, not zeroed
    p4 = [float(softmax(w.scores(w.rows(w.bucket_ids(state))))[4]) for w in (params, bounded)]
    assert p4[1] > p4[0]


def test_settings_refuse_an_unknown_advantage_normalisation_and_negative_update_knobs():
    from train.rl_loop import RLSettings

    with pytest.raises(RLError, match="--adv-norm 'zscore': one of none, group, batch"):
        RLSettings(tasks="x", adv_norm="zscore").check()
    for knob in ("clip", "entropy", "max_kl"):
        with pytest.raises(RLError, match="must be >= 0"):
            RLSettings(tasks="x", **{knob: -0.1}).check()
    with pytest.raises(RLError, match="--epochs must be at least 1"):
        RLSettings(tasks="x", epochs=0).check()

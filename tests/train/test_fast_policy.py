from __future__ import annotations

import json

import numpy as np
import pytest
from synthetic import SYMPTOMS, synthetic_episodes

from rollout.core.state import EpisodeState
from rollout.policies.rules import RulesFirst
from train.fast_policy import EmptyDatasetError, HashedLinearPolicy, train_fast_policy
from train.manifest import Manifest, ManifestError
from train.policies import load_policy


def test_trains_loads_and_beats_majority(tmp_path):
    episodes = synthetic_episodes(n_tasks=50, noise=0.25, seed=1)
    manifest = train_fast_policy(episodes, tmp_path / "fast")
    m = manifest.metrics
    assert m["val_examples"] > 20
    assert m["val_accuracy"] > m["val_majority_rate"] + 0.3
    policy = load_policy(tmp_path / "fast")
    assert isinstance(policy, HashedLinearPolicy)
    # The teacher follows the hidden rule 75% of the time; the student learns the rule itself.
    fresh = [EpisodeState.from_json(s.state_json) for ep in synthetic_episodes(n_tasks=10, seed=99) for s in ep.steps
             if not s.is_hardcoded]
    rule = {err: agent for _, err, agent in SYMPTOMS}
    hits = sum(policy.decide(s).agent_id == rule[s.validator_errors] for s in fresh)
    assert hits / len(fresh) > 0.9
    assert Manifest.load(tmp_path / "fast").policy_class == "hashed_linear"
    state = EpisodeState.from_json(episodes[0].steps[0].state_json)
    assert policy.decide(state).decided_by == "model"
    wrapped = load_policy(tmp_path / "fast", rules_first=True)
    assert isinstance(wrapped, RulesFirst)
    assert wrapped.decide(EpisodeState(task_description="x")).agent_id == 2  # empty domain: rule


def test_a_state_past_the_feature_caps_decides_as_its_capped_copy(tmp_path):
    """What a decision reads is capped (train/features.py), so its cost is bounded by the caps, not
    by the body; the latency itself is measured by benchmarks/serve.py and benchmarks/decision_cost.py."""
    from train.features import MAX_TASK_CHARS

    train_fast_policy(synthetic_episodes(n_tasks=30, seed=2), tmp_path / "fast")
    policy = load_policy(tmp_path / "fast")
    goal = " the goal: stack b on a."
    capped = EpisodeState(task_description=("t " * MAX_TASK_CHARS)[-(MAX_TASK_CHARS - len(goal)):] + goal,
                          domain="(define (domain d))", validator_errors="err " * 500,
                          error_category="plan_invalid", history=list(range(10)))
    huge = EpisodeState.from_dict({**capped.to_dict(), "task_description": "t " * 200_000 + goal})
    assert len(huge.task_description) > 20 * MAX_TASK_CHARS
    assert policy.decide(huge).agent_id == policy.decide(capped).agent_id
    assert np.array_equal(policy.scores(huge), policy.scores(capped))



def test_empty_dataset_stops_clearly(tmp_path):
    rejected = synthetic_episodes(n_tasks=3, accepted_fraction=0.0)
    with pytest.raises(EmptyDatasetError, match="no supervised examples"):
        train_fast_policy(rejected, tmp_path / "fast")
    with pytest.raises(EmptyDatasetError):
        train_fast_policy([], tmp_path / "fast")


def test_bad_manifests_refused(tmp_path):
    train_fast_policy(synthetic_episodes(n_tasks=10), tmp_path / "fast")
    path = tmp_path / "fast" / "manifest.json"
    data = json.loads(path.read_text())
    data["label_map"].pop("20")
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="0..20"):
        load_policy(tmp_path / "fast")
    data["label_map"]["20"] = "20"
    data["policy_class"] = "mystery"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="unknown policy_class"):
        load_policy(tmp_path / "fast")
    with pytest.raises(ManifestError, match="does not exist"):
        load_policy(tmp_path / "nowhere")
    (tmp_path / "fast" / "weights.npz").write_bytes(b"garbage")
    data["policy_class"] = "hashed_linear"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="unreadable weights"):
        load_policy(tmp_path / "fast")


def test_static_features_see_a_precondition_nothing_establishes():
    from train.features import state_features

    domain = ("(define (domain d) (:predicates (at ?x) (ready) (seen ?x))"
              " (:action go :parameters (?x) :precondition (and (at ?x) {extra}) :effect (and (seen ?x)"
              " (not (at ?x)))))")
    problem = "(define (problem p) (:domain d) (:objects a) (:init (at a)) (:goal (seen a)))"
    clean = state_features(EpisodeState("t", domain=domain.format(extra=""), problem=problem))
    orphan = state_features(EpisodeState("t", domain=domain.format(extra="(ready)"), problem=problem,
                                         error_category="unsolvable_proved"))
    assert "static=all_established" in clean and "static=unestablished_pre" not in clean
    assert {"static=unestablished_pre", "static=unestablished_arity0=True",
            "static=unestablished_pre|unsolvable_proved"} <= set(orphan)
    assert "static=unparsed" in state_features(EpisodeState("t", domain="(define (domain", problem=problem))


def test_goal_text_feature_sees_a_goal_written_the_wrong_way_round():
    from train.features import state_features

    description = "Move the disc. Goal: on(d1, peg3), clear(peg1)."
    problem = "(define (problem p) (:domain hanoi) (:objects d1 peg1 peg3) (:init) (:goal (and (on {}) (clear peg1))))"
    right = state_features(EpisodeState(description, problem=problem.format("d1 peg3")))
    wrong = state_features(EpisodeState(description, problem=problem.format("peg3 d1")))
    assert "goal_text=in_order" in right and "goal_text=reversed" not in right
    assert "goal_text=reversed" in wrong
    other = state_features(EpisodeState("Goal: the red block on the blue one.", problem=problem.format("d1 peg3")))
    assert "goal_text=unmatched" in other


def test_repeat_limit_moves_to_the_next_best_agent(tmp_path):
    import numpy as np

    bias = np.full(21, -5.0, dtype=np.float32)
    bias[20], bias[4], bias[11] = 3.0, 2.0, -1.0
    empty = np.zeros((0, 21), dtype=np.float32)
    limited = HashedLinearPolicy(np.zeros(0, dtype=np.int64), empty, bias, 16, max_tries=2)
    free = HashedLinearPolicy(np.zeros(0, dtype=np.int64), empty, bias, 16)
    once, twice = EpisodeState("t", history=[20]), EpisodeState("t", history=[9, 20, 20])
    assert limited.decide(once).agent_id == 20 and free.decide(twice).agent_id == 20
    assert limited.decide(twice).agent_id == 4
    assert limited.decide(EpisodeState("t", history=[20, 20, 4, 4, 11, 11])).agent_id == 11  # NoOp is never excluded


def _bias_policy(prior: dict[int, float], *, discount: float, history_weight: tuple[str, int, float] | None = None,
                 retry_prior: str = "fresh") -> HashedLinearPolicy:
    """A fast policy whose scores are `prior` (log-weights) plus, optionally, one history feature's
    weight on one agent (so the model itself would repeat that agent after it ran)."""
    from train.features import hash_features

    bias = np.full(21, -20.0, dtype=np.float32)
    for agent, weight in prior.items():
        bias[agent] = weight
    buckets, weights = np.zeros(0, dtype=np.int64), np.zeros((0, 21), dtype=np.float32)
    if history_weight:
        feature, agent, weight = history_weight
        buckets = np.array(hash_features([feature], 1 << 10), dtype=np.int64)
        weights = np.zeros((1, 21), dtype=np.float32)
        weights[0, agent] = weight
    return HashedLinearPolicy(buckets, weights, bias, 1 << 10, retry_discount=discount, retry_prior=retry_prior)


def test_next_ranked_moves_on_from_a_failed_choice_by_the_fresh_symptom_prior():
    import math

    # fresh symptom: agent 20 0.5, 18 0.4, 19 0.1; the model, having run 20, would run it again
    prior = {20: math.log(0.5), 18: math.log(0.4), 19: math.log(0.1)}
    state = EpisodeState("t", error_category="unsolvable_proved", history=[20])
    repeat = ("tried=20", 20, 5.0)
    assert _bias_policy(prior, discount=0.0, history_weight=repeat).decide(state).agent_id == 20  # off: repeats
    moving = _bias_policy(prior, discount=0.3, history_weight=repeat)
    assert moving.decide(state).agent_id == 18  # 0.5 * 0.3 < 0.4
    assert moving.decide(EpisodeState("t", history=[20, 18])).agent_id == 20  # 0.15 > 0.12, > 0.1
    assert moving.decide(EpisodeState("t", history=[20, 18, 20])).agent_id == 18  # 0.045 < 0.12
    # a dominant cause is retried: 0.95 * 0.3 > 0.05
    dominant = _bias_policy({20: math.log(0.95), 18: math.log(0.05)}, discount=0.3, history_weight=repeat)
    assert dominant.decide(state).agent_id == 20
    # a new agent the model chooses is kept as it is; a valid plan is not second-guessed
    assert moving.decide(EpisodeState("t", history=[9])).agent_id == 20
    assert moving.decide(EpisodeState("t", history=[20], plan_valid=True)).agent_id == 20
    with pytest.raises(ManifestError, match="retry_prior must be one of"):
        _bias_policy(prior, discount=0.3, retry_prior="later")


def test_next_ranked_with_the_model_prior_keeps_what_the_history_taught():
    import math

    from train.features import hash_features

    # fresh: 20 0.5, 18 0.4, 1 0.1; after 20 ran the model raises 20 (+1.6) and the generalist 1 (+2.0)
    bias = np.full(21, -20.0, dtype=np.float32)
    bias[20], bias[18], bias[1] = math.log(0.5), math.log(0.4), math.log(0.1)
    buckets = np.array(hash_features(["tried=20"], 1 << 10), dtype=np.int64)
    weights = np.zeros((1, 21), dtype=np.float32)
    weights[0, 20], weights[0, 1] = 1.6, 2.0
    state = EpisodeState("t", error_category="unsolvable_proved", history=[20])

    def choice(prior: str) -> int:
        return HashedLinearPolicy(buckets, weights, bias, 1 << 10, retry_discount=0.2,
                                  retry_prior=prior).decide(state).agent_id

    assert choice("fresh") == 18  # 0.5 * 0.2 < 0.4
    assert choice("model") == 1  # the model's scores with the history: 1 (-0.30) beats 20 (0.91 + log 0.2)


def test_retry_discount_is_read_from_the_manifest_and_checked(tmp_path):
    episodes = synthetic_episodes(n_tasks=20, noise=0.1, seed=3)
    train_fast_policy(episodes, tmp_path / "old")
    assert load_policy(tmp_path / "old").retry_discount == 0.0  # models without the setting keep deciding as before
    manifest = Manifest.load(tmp_path / "old")
    manifest.extra["retry_discount"] = 0.4
    manifest.save(tmp_path / "old")
    assert load_policy(tmp_path / "old").retry_discount == pytest.approx(0.4)
    manifest.extra["retry_discount"] = 1.5
    manifest.save(tmp_path / "old")
    with pytest.raises(ManifestError, match="retry_discount must be in"):
        load_policy(tmp_path / "old")


def test_retry_discount_counts_the_teacher_steps_that_left_the_verdict_unchanged():
    from rollout.core.agent_table import agent_name
    from rollout.core.trajectory import EpisodeRecord, StepRecord
    from train.fast_policy import retry_discount_from

    def episode(accepted: bool, name: str) -> EpisodeRecord:
        failing = EpisodeState("t", error_category="unsolvable_proved", validator_errors="error: unsolvable")
        states = [failing, failing, failing, EpisodeState("t", plan_valid=True)]
        steps = [StepRecord(step=i, state_json=s.to_json(), agent_id=20 if i < 3 else 11, agent_name=agent_name(20),
                            decided_by="teacher" if i < 3 else "rule", is_hardcoded=i == 3, llm_calls=1)
                 for i, s in enumerate(states)]
        return EpisodeRecord(episode_id=name, run_id="r", task_id="t", family="classical", domain_name="d",
                             policy_name="teacher", policy_version="1", llm_backend="sim",
                             success_validator=accepted, success_oracle=accepted, steps=steps)

    # steps 0 and 1 left the verdict as it was, step 2 reached a valid plan: (2 + 1) / (3 + 2)
    assert retry_discount_from([episode(True, "a"), episode(False, "b")]) == pytest.approx(0.6)
    assert retry_discount_from([]) == pytest.approx(0.5)


_TYPED_DOMAIN = """(define (domain d) (:requirements :strips :typing) (:types truck plane - vehicle place)
  (:predicates (at ?v - vehicle ?p - place))
  (:action move :parameters (?v - truck ?from ?to - place)
    :precondition (at ?v ?from) :effect (and (not (at ?v ?from)) (at ?v ?to))))"""
_TYPED_PROBLEM = ("(define (problem p) (:domain d) (:objects t1 - truck a b - place) (:init (at t1 a))"
                  " (:goal (at t1 b)))")


def test_type_features_tell_a_lost_parent_from_a_narrowed_predicate_and_from_consistent_types():
    from train.features import _type_features

    assert _type_features(_TYPED_DOMAIN, _TYPED_PROBLEM) == ("types=consistent",)
    lost_parent = _TYPED_DOMAIN.replace("truck plane - vehicle place", "truck plane vehicle place")
    assert _type_features(lost_parent, _TYPED_PROBLEM) == ("type_init=mismatch", "type_pred=unpopulated",
                                                           "type_use=unrelated")
    narrowed = _TYPED_DOMAIN.replace("(at ?v - vehicle ?p - place))", "(at ?v - plane ?p - place))")
    feats = _type_features(narrowed, _TYPED_PROBLEM)
    assert "type_use=unrelated" in feats and "type_init=mismatch" in feats
    assert "type_pred=unpopulated" in feats  # no plane among the objects
    wider = narrowed.replace("?v - truck ?from", "?v - vehicle ?from")
    assert "type_use=wider" in _type_features(wider, _TYPED_PROBLEM)
    untyped = _type_features("(define (domain d) (:predicates (p)))", "(define (problem q) (:domain d))")
    assert untyped == ("types=none",)


def test_feature_sets_by_version_and_old_artifacts(tmp_path):
    from train.features import FEATURE_VERSION, FeatureVersionError, state_features

    state = EpisodeState("t", domain=_TYPED_DOMAIN, problem=_TYPED_PROBLEM, error_category="unsolvable_proved")
    new, old = state_features(state), state_features(state, "halo-feat-3")
    assert "types=consistent" in new and "types=consistent|unsolvable_proved" in new
    assert not any(f.startswith("type") for f in old) and set(old) < set(new)
    with pytest.raises(FeatureVersionError, match="retrain"):
        state_features(state, "halo-feat-1")
    train_fast_policy(synthetic_episodes(n_tasks=20, noise=0.1, seed=4), tmp_path / "m")
    manifest = Manifest.load(tmp_path / "m")
    assert manifest.extra["feature_version"] == FEATURE_VERSION == load_policy(tmp_path / "m").feature_version
    del manifest.extra["feature_version"]  # an artifact from before the version was recorded: halo-feat-3
    manifest.save(tmp_path / "m")
    assert load_policy(tmp_path / "m").feature_version == "halo-feat-3"
    manifest.extra["feature_version"] = "halo-feat-9"
    manifest.save(tmp_path / "m")
    with pytest.raises(ManifestError, match="feature set 'halo-feat-9' is not computed"):
        load_policy(tmp_path / "m")

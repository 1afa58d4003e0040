"""The paper's accounting (train/accounting.py) and the Table-2 targets (train/table2.py) on
episodes built by hand, where every figure can be worked out on paper."""

from __future__ import annotations

import math

import pytest

from rollout.core.trajectory import EpisodeRecord, StepRecord
from rollout.sim.paper_calibration import PAPER_CALIBRATION, served_usd_per_decision, teacher_usd_per_call
from train.accounting import Orchestrator, account, episode_calls, iterations
from train.table2 import TRAINED, WEAKER, build_families, format_table2, paired_table, table2_targets


def _step(i: int, agent: int, decided_by: str, calls: int, latency_ms: float = 0.0) -> StepRecord:
    return StepRecord(step=i, state_json="{}", agent_id=agent, agent_name=str(agent), decided_by=decided_by,
                      is_hardcoded=decided_by == "rule", llm_calls=calls, decision_latency_ms=latency_ms)


def _episode(task: int, seed: int, steps: list[StepRecord], ok: bool, family: str = "planbench") -> EpisodeRecord:
    return EpisodeRecord(episode_id=f"e{task}-{seed}", run_id="r", task_id=f"t{task}", family=family,
                         domain_name="d", policy_name="p", policy_version="1", llm_backend="sim",
                         success_validator=ok, success_oracle=ok, steps=steps, seed=seed,
                         total_llm_calls=sum(s.llm_calls for s in steps))


def teacher_episode(task: int = 0, seed: int = 0, ok: bool = True, family: str = "planbench") -> EpisodeRecord:
    # rule picks agent 9 (LLM agent, 1 call); the teacher picks agent 0 (1 decision call + 1 agent call),
    # then agent 14 (deterministic: 2 decision calls, a correction round); rule NoOp; rule rendering (agent 12)
    return _episode(task, seed, [_step(0, 9, "rule", 1), _step(1, 0, "teacher", 2), _step(2, 14, "teacher", 2),
                                 _step(3, 11, "rule", 0), _step(4, 12, "rule", 1)], ok, family)


def trained_episode(task: int = 0, seed: int = 0, ok: bool = True, family: str = "planbench") -> EpisodeRecord:
    # a trained decision records 0 calls itself: the paper counts it as one
    return _episode(task, seed, [_step(0, 9, "rule", 1), _step(1, 14, "model", 0, latency_ms=3.0),
                                 _step(2, 11, "rule", 0), _step(3, 12, "rule", 1)], ok, family)


def test_counting_rules_on_one_episode() -> None:
    t = teacher_episode()
    assert iterations(t) == 3  # steps 0-2; the NoOp and the rendering only finish the episode
    assert episode_calls(t) == (3, 2)  # decisions: 1 + 2 (correction round); agents: 9 and 0, not 12
    m = trained_episode()
    assert iterations(m) == 2 and episode_calls(m) == (1, 1)
    # the dynamic agent (21) is an LLM call of its own, beside the decision that created it
    dyn = _episode(0, 0, [_step(0, 21, "model", 1), _step(1, 21, "teacher", 2)], False)
    assert episode_calls(dyn) == (2, 2)


def test_costs_in_both_conventions() -> None:
    weak = account([teacher_episode()], Orchestrator("prompted", "weaker"), usd_per_hour=1.2)
    assert weak.llm_calls == 1 + 3 + 2  # the draft, the decisions, the LLM agents
    assert weak.usd_paper == weak.usd_ours == pytest.approx(3 * teacher_usd_per_call("weaker"))
    trained = account([trained_episode()], Orchestrator("trained"), usd_per_hour=3600.0)
    assert trained.llm_calls == 1 + 1 + 1
    assert trained.usd_paper == pytest.approx(served_usd_per_decision())
    assert trained.usd_ours == pytest.approx(0.003)  # 3 ms at $3600/h


def test_calibration_reproduces_the_published_per_task_costs() -> None:
    for profile in ("weaker", "stronger"):
        pub = PAPER_CALIBRATION["teachers"][profile]["published"]
        assert teacher_usd_per_call(profile) * pub["calls"] == pytest.approx(pub["usd_per_task"], rel=0.02)
    pub = PAPER_CALIBRATION["served_policy"]["published"]
    assert served_usd_per_decision() * pub["calls"] == pytest.approx(pub["usd_per_task"], rel=0.02)


def _runs(trained_ok: list[bool], teacher_ok: list[bool]) -> dict:
    return {TRAINED: ("rules+model:/m", [trained_episode(i, 0, ok) for i, ok in enumerate(trained_ok)]),
            WEAKER: ("teacher:model=sim", [teacher_episode(i, 0, ok) for i, ok in enumerate(teacher_ok)])}


def test_families_table_and_targets() -> None:
    runs = _runs([True] * 40, [True] * 38 + [False] * 2)
    families = build_families(runs, usd_per_hour=1.2)
    assert set(families) == {"planbench"} and set(families["planbench"]) == {TRAINED, WEAKER}
    assert families["planbench"][TRAINED]["llm_calls"] == 3.0
    targets = {name: ok for name, ok, _ in table2_targets(families, paired_table(runs))}
    assert targets["planbench: trained oracle success not below the weaker teacher's (lower 95% bound >= -2 points)"]
    assert targets["planbench: LLM calls/episode (paper's count) <= 0.55x the weaker teacher's"]  # 3 / 6
    assert targets["planbench: cost/task (paper's convention) <= 1/45 of the weaker teacher's"]
    # the stronger teacher's row is missing: its target fails, and so does every target of a missing family
    assert not targets["planbench: trained oracle success within 3 points of the stronger teacher's "
                       "(lower 95% bound >= -3 points)"]
    assert not targets["natural_plan: LLM calls/episode (paper's count) <= 0.55x the weaker teacher's"]
    text = format_table2(families)
    assert "published real-LLM (paper)" in text and "simulated (llm_backend=sim)" in text


def test_a_trained_policy_clearly_below_fails() -> None:
    runs = _runs([i % 2 == 0 for i in range(60)], [True] * 60)
    pd = paired_table(runs)["planbench"][f"{TRAINED} - {WEAKER}"]
    assert pd["difference"] == pytest.approx(-50.0) and pd["se"] > 0
    targets = table2_targets(build_families(runs, 1.2), paired_table(runs))
    assert not targets[0][1]


def test_too_few_paired_episodes_fail() -> None:
    runs = _runs([True] * 10, [True] * 10)
    targets = table2_targets(build_families(runs, 1.2), paired_table(runs))
    assert not targets[0][1] and "fewer than 30 paired episodes" in targets[0][2]


def test_generated_classical_sets_count_as_the_classical_family() -> None:
    runs = {WEAKER: ("teacher:model=sim", [teacher_episode(0, 0, True, family="generated")])}
    assert set(build_families(runs, 1.2)) == {"classical"}
    assert math.isnan(paired_table(runs).get("classical", {}).get("x", {"difference": math.nan})["difference"])

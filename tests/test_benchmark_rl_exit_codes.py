"""benchmarks/rl.py: its exit code follows its printed targets (hand-built figures, no long runs)."""

from __future__ import annotations

import math

import pytest
from test_benchmark_exit_codes import _load

from rollout.core.trajectory import EpisodeRecord
from train.targets import Z_ONE_SIDED_95

TASKS = {"pairs": 300.0, "start_success": 0.30, "rl_success": 0.40, "success_diff": 0.10, "success_diff_se": 0.02,
         "success_diff_lower": 0.067, "start_calls": 9.0, "rl_calls": 8.5, "call_ratio": 0.944,
         "call_ratio_upper": 0.98}
DOMAINS = {**TASKS, "success_diff": 0.0, "success_diff_lower": -0.015}


def test_exit_code_follows_each_target() -> None:
    rl = _load("rl")
    lines, code = rl.verdict({"held_out_tasks": TASKS, "held_out_domains": DOMAINS}, dropped=0)
    assert code == 0 and len(lines) == 3 and all(line.endswith(": met") for line in lines)
    for name, key, value in (("held_out_tasks", "success_diff_lower", 0.049),  # +5 points is the bound's
                             ("held_out_tasks", "call_ratio_upper", 1.001),  # more calls than the start
                             ("held_out_domains", "success_diff_lower", -0.021),  # worse on unseen domains
                             ("held_out_tasks", "success_diff_lower", math.nan)):  # cannot be computed
        figures = {"held_out_tasks": TASKS, "held_out_domains": DOMAINS}
        figures[name] = {**figures[name], key: value}
        lines, code = rl.verdict(figures, dropped=0)
        assert code == 1 and sum("NOT met" in line for line in lines) == 1, (name, key, value)
    assert rl.verdict({"held_out_tasks": TASKS}, dropped=0)[1] == 1  # no held-out domain pairs
    assert rl.verdict({"held_out_tasks": TASKS, "held_out_domains": {"pairs": 0.0}}, dropped=0)[1] == 1
    assert rl.verdict({"held_out_tasks": TASKS, "held_out_domains": DOMAINS}, dropped=1)[1] == 1


def test_figures_are_paired_by_task_and_seed() -> None:
    rl = _load("rl")

    def record(calls: int, oracle: bool) -> EpisodeRecord:
        return EpisodeRecord("e", "r", "t", "f", "d", "p", "1", "sim", oracle, oracle, total_llm_calls=calls)

    start = [record(10, False), record(10, True), record(8, False), record(12, True)]
    after = [record(8, True), record(10, True), record(8, False), record(10, True)]
    f = rl.paired_figures(start, after)
    assert f["pairs"] == 4 and f["success_diff"] == pytest.approx(0.25)
    assert f["success_diff_se"] == pytest.approx(0.25)  # diffs 1,0,0,0: sd 0.5 over sqrt(4)
    assert f["call_ratio"] == pytest.approx(36 / 40)
    assert f["success_diff_lower"] == pytest.approx(0.25 - Z_ONE_SIDED_95 * 0.25)


def test_a_dev_run_without_held_out_domains_has_no_pairs_there_and_fails_that_target(tmp_path) -> None:
    rl = _load("rl")
    figures, dropped = rl.evaluate([], tmp_path / "start", tmp_path / "rl", [2000], "sim:scale=0", 1)
    assert figures == {"pairs": 0.0} and dropped == 0
    lines, code = rl.verdict({"held_out_tasks": TASKS, "held_out_domains": figures}, dropped=0)
    assert code == 1 and lines[-1] == "held-out domains: oracle success: no pairs; >= -2 points: NOT met"


def test_the_diagnosis_flags_a_sampling_probability_the_stored_state_does_not_give() -> None:
    import numpy as np

    from rollout.core.agent_table import NUM_AGENTS
    from rollout.core.state import EpisodeState
    from rollout.core.trajectory import StepRecord
    from train.rl import LinearWeights

    diagnose = _load("rl_diagnose")
    uniform = LinearWeights(np.zeros(0, dtype=np.int64), np.zeros((0, NUM_AGENTS)), np.zeros(NUM_AGENTS))
    state = EpisodeState(task_description="stack the red block on the blue one").to_json()
    steps = [StepRecord(step=i, state_json=state, agent_id=1, agent_name="x", decided_by=by, is_hardcoded=False,
                        decision_reason=reason)
             for i, (by, reason) in enumerate([("model", f"sampled p={1 / NUM_AGENTS:.2f}"),
                                               ("model", "sampled p=0.50"), ("rule", "sampled p=0.50")])]
    record = EpisodeRecord(episode_id="e", run_id="t", task_id="task", family="f", domain_name="d",
                           policy_name="p", policy_version="0", llm_backend="sim", success_validator=False,
                           success_oracle=False, steps=steps)
    assert diagnose.sampler_matches(uniform, [record], 1.0) == (1, 2)  # the rule step is not checked


def test_every_rl_setting_is_an_option_of_the_benchmark() -> None:
    from dataclasses import fields

    from train.rl_loop import RLSettings

    rl = _load("rl")
    args = rl._args(["--tasks", "gen:x", "--out", "y", "--advantage", "fork", "--fork-k", "4", "--fork-states", "3"])
    settings = RLSettings(tasks="", **{f.name: getattr(args, f.name) for f in fields(RLSettings) if f.name != "tasks"})
    assert (settings.advantage, settings.fork_k, settings.fork_states, settings.group) == ("fork", 4, 3, 1)
    settings.check()


def test_expert_iteration_defaults_to_one_pass_over_every_training_task_twice() -> None:
    rl = _load("rl")
    args = rl._args(["--tasks", "gen:x", "--out", "y", "--advantage", "exit", "--train-tasks", "50"])
    assert (args.iterations, args.tasks_per_iter, args.group) == (1, 50, 2)
    args = rl._args(["--tasks", "gen:x", "--out", "y"])
    assert (args.iterations, args.tasks_per_iter, args.group) == (8, 20, 4)


def test_headroom_runs_the_hidden_fault_teacher_and_its_clone_and_never_moves_the_exit_code(tmp_path) -> None:
    import argparse

    from rollout.tasks import load_tasks

    rl = _load("rl")
    tasks = load_tasks("planbench:blocksworld:3")
    args = argparse.Namespace(teacher="rules+teacher:model=sim", teacher_seeds=1, llm="sim:scale=0", concurrency=2)
    room = rl.headroom(tasks, tasks, [2000, 2001], args, tmp_path)
    assert room["oracle_greedy_episodes"] == 6 and room["oracle_clone_episodes"] == 6
    assert 0.0 <= room["oracle_greedy_success"] <= 1.0 and 0.0 <= room["oracle_clone_success"] <= 1.0
    assert (tmp_path / "oracle-clone" / "start" / "manifest.json").is_file()  # fitted like the start
    line = rl.headroom_line({**room, "oracle_greedy_success": 0.683, "oracle_clone_success": 0.579},
                            {**TASKS, "start_success": 0.598})
    assert "68.3% (+8.5 over the start's 59.8%)" in line and "57.9% (-1.9)" in line
    assert "no target" in line


def test_headroom_is_refused_in_one_line_outside_the_simulated_world(capsys) -> None:
    rl = _load("rl")
    with pytest.raises(SystemExit) as exc:
        rl._args(["--tasks", "gen:x", "--out", "o", "--headroom", "--llm", "openai:model=gpt-5-mini"])
    assert exc.value.code == 2
    assert "--headroom needs the simulated world" in capsys.readouterr().err.strip().splitlines()[-1]
    assert rl._args(["--tasks", "gen:x", "--out", "o", "--headroom"]).headroom

"""The vanilla-LLM baseline: plans written directly, judged by the same oracle."""

from __future__ import annotations

from rollout.loop.oracle import check_plan
from rollout.sim.paper_calibration import vanilla_success_rate
from rollout.sim.vanilla import run_vanilla, written_plan
from rollout.tasks.loaders import load_tasks


def test_vanilla_plans_are_judged_by_the_oracle() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    seeds = list(range(40))
    outcomes = run_vanilla([task], seeds)
    assert len(outcomes) == 40 and all(o.correct is not None for o in outcomes)
    for o in outcomes:
        plan = written_plan(task, task.gold_plan, o.seed)
        assert o.correct == (plan == task.gold_plan or check_plan(task, plan).correct)
    rate = sum(o.correct for o in outcomes) / len(outcomes)
    assert abs(rate - vanilla_success_rate("planbench", "blocksworld")) < 0.25
    assert 0 < rate < 1


def test_vanilla_on_a_task_without_a_gold_plan_plans_one() -> None:
    task = load_tasks("ipc:bundled")[0]
    assert task.gold_plan is None
    outcomes = run_vanilla([task], [0, 1, 2])
    assert all(o.correct is not None for o in outcomes)

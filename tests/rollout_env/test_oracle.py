"""Oracle checks against gold PDDL with the real validator, with name mapping."""

from __future__ import annotations

from pathlib import Path

from rollout.loop.oracle import check_plan, map_plan
from rollout.tasks import load_tasks
from rollout.tasks.base import Task

SAMPLE = Path(__file__).with_name("data") / "natural_plan_sample.json"


def test_every_bundled_ground_truth_plan_is_oracle_correct() -> None:
    tasks = load_tasks("planbench:all")
    verdicts = [check_plan(t, t.gold_plan) for t in tasks]
    assert all(v.correct for v in verdicts), [t.task_id for t, v in zip(tasks, verdicts, strict=True) if not v.correct]
    assert {v.method for v in verdicts} == {"gold_pddl"}


def test_corrupted_plans_are_not_oracle_correct() -> None:
    for task in load_tasks("planbench:all:4"):
        steps = task.gold_plan.splitlines()
        assert check_plan(task, "\n".join(steps[:-1])).correct is False  # last step missing
        assert check_plan(task, "\n".join(reversed(steps))).correct is False
    task = load_tasks("planbench:blocksworld:1")[0]
    assert check_plan(task, "").correct is False
    unreadable = check_plan(task, "this is not a plan")
    assert unreadable.correct is False and "unreadable" in unreadable.detail


def test_names_mapped_by_normalisation_and_table() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]  # (unstack d c) (put-down d) (pick-up c) (stack c a)
    shouted = "(UNSTACK D C)\n(put_down d)\n(Pick_Up c)\n(stack c a)\n"
    assert check_plan(task, shouted).correct is True
    renamed = "(take_off d_obj c_obj)\n(put_down d_obj)\n(pick_up c_obj)\n(stack c_obj a_obj)\n"
    assert check_plan(task, renamed).correct is False
    table = {"take_off": "unstack", "a_obj": "a", "c_obj": "c", "d_obj": "d"}
    assert check_plan(task, renamed, name_map=table).correct is True
    assert map_plan("(TAKE-OFF d_obj c_obj)", {"unstack", "c", "d"}, table) == "(unstack d c)\n"


def test_ground_truth_fallback_and_no_gold() -> None:
    gold_only = Task("x/1", "planbench", "d", "desc", gold_plan="(a b)\n(c d)\n")
    assert check_plan(gold_only, "(A b)\n(c d)").correct is True
    assert check_plan(gold_only, "(c d)").correct is False
    nothing = load_tasks(f"natural_plan:{SAMPLE}")[0]
    verdict = check_plan(nothing, "(a)")
    assert verdict.correct is None and verdict.method == "benchmark_checker" and "no PDDL encoding" in verdict.detail


def test_gold_pddl_check_reports_its_solver_cpu() -> None:
    """The oracle's validator call is solver work: an episode counts it with its other solver calls."""
    task = load_tasks("planbench:blocksworld:1")[0]
    verdict = check_plan(task, task.gold_plan)
    assert verdict.correct is True and verdict.solver_cpu_s > 0

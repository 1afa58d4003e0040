"""The vanilla-LLM baseline in the simulated world: a model writes the plan directly from the
statement (no PDDL, no planner, no repair loop), and the same oracle scores it.

Whether the written plan is right is drawn per (task, seed) with the rates of
rollout/sim/paper_calibration.py (assumptions modelled on published vanilla figures); a right
plan is the gold plan, a wrong one the gold plan with one step dropped (more when dropping one
still solves the task). The oracle (`rollout.loop.oracle.check_plan`: gold PDDL validation, or the
benchmark's checker for Natural Plan) judges every plan, so a corruption that happens to be
valid counts as right."""

from __future__ import annotations

import random
from dataclasses import dataclass

import solvers
from rollout.loop.oracle import check_plan
from rollout.sim.paper_calibration import vanilla_success_rate
from rollout.tasks.base import Task


@dataclass(frozen=True)
class VanillaOutcome:
    task_id: str
    family: str
    domain_name: str
    seed: int
    correct: bool | None


def _gold_plan(task: Task) -> str | None:
    if task.gold_plan:
        return task.gold_plan
    if not task.gold_domain or not task.gold_problem:
        return None
    found = solvers.plan(task.gold_domain, task.gold_problem, planner=task.target_planner)
    return solvers.plan_to_text(found.plan) if found.plan else None


def written_plan(task: Task, gold: str, seed: int) -> str:
    rng = random.Random(f"vanilla|{seed}|{task.task_id}")
    if rng.random() < vanilla_success_rate(task.family, task.domain_name):
        return gold
    steps = [ln for ln in gold.splitlines() if ln.strip() and not ln.strip().startswith(";")]
    if len(steps) > 1:
        del steps[rng.randrange(len(steps))]
    else:
        steps = []
    return "\n".join(steps) + "\n"


def run_vanilla(tasks: list[Task], seeds: list[int]) -> list[VanillaOutcome]:
    out = []
    for task in tasks:
        gold = _gold_plan(task)
        for seed in seeds:
            if gold is None:
                out.append(VanillaOutcome(task.task_id, task.family, task.domain_name, seed, None))
                continue
            plan = written_plan(task, gold, seed)
            verdict = check_plan(task, plan) if plan.strip() else None
            correct = verdict.correct if verdict is not None else False
            out.append(VanillaOutcome(task.task_id, task.family, task.domain_name, seed, correct))
    return out

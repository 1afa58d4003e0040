"""Augmentations must not change the validator's verdict: checked with the real validator."""

from __future__ import annotations

import random

import solvers
from rollout.core.trajectory import EpisodeRecord, StepRecord
from rollout.tasks.loaders import load_tasks
from train.augment import (
    Variant,
    apply_to_artifacts,
    augment_examples,
    choose_renames,
    problem_objects,
    reorder_problem,
    verdict_kept,
)
from train.examples import select_examples


def _tasks():
    return load_tasks("planbench:logistics:2") + load_tasks("ipc:bundled")[:2]


def test_rename_and_reorder_keep_valid_plans_valid():
    for task in _tasks():
        plan = task.gold_plan or solvers.plan(task.gold_domain, task.gold_problem).plan_text
        assert solvers.validate(task.gold_domain, task.gold_problem, plan).valid
        rng = random.Random(3)
        renames = choose_renames(task.gold_problem, task.gold_domain, rng, [task.gold_problem, plan])
        assert renames, task.task_id
        domain, problem, plan2 = apply_to_artifacts(task.gold_domain, task.gold_problem, plan, Variant(renames, 9, "t"))
        assert problem != task.gold_problem and plan2 != plan
        assert set(problem_objects(problem)) == set(renames.values()) | (set(problem_objects(task.gold_problem))
                                                                           - set(renames))
        assert solvers.validate(domain, problem, plan2).valid, task.task_id


def test_reorder_shuffles_init_and_goal():
    task = load_tasks("planbench:logistics:1")[0]
    out = reorder_problem(task.gold_problem, random.Random(1))
    assert out != task.gold_problem
    init_before = task.gold_problem.split(":init")[1].split(":goal")[0]
    facts = sorted(" ".join(f.strip("() \n").split()) for f in init_before.split(")") if f.strip("() \n"))
    init_after = out.split(":init")[1].split(":goal")[0]
    assert sorted(" ".join(f.strip("() \n").split()) for f in init_after.split(")") if f.strip("() \n")) == facts
    assert reorder_problem("(define (problem broken", random.Random(1)) == "(define (problem broken"


def _episode(task, plan: str) -> EpisodeRecord:
    from rollout.core.state import EpisodeState

    state = EpisodeState(task_description=task.description, domain=task.gold_domain, problem=task.gold_problem,
                         plan=plan, error_category="plan_invalid", validator_errors="[validate.goal_not_reached]")
    step = StepRecord(step=0, state_json=state.to_json(), agent_id=16, agent_name="AgentPlanTruncator",
                      decided_by="scripted", is_hardcoded=False, domain_after=task.gold_domain,
                      problem_after=task.gold_problem, plan_after=plan, plan_valid=True)
    return EpisodeRecord(episode_id="e1", run_id="r", task_id=task.task_id, family=task.family,
                         domain_name=task.domain_name, policy_name="scripted", policy_version="1", llm_backend="sim",
                         success_validator=True, success_oracle=True, steps=[step], final_plan=plan)


def test_verdict_check_catches_a_breaking_variant():
    task = load_tasks("planbench:logistics:1")[0]
    ep = _episode(task, task.gold_plan)
    objs = problem_objects(task.gold_problem)
    good = Variant(choose_renames(task.gold_problem, task.gold_domain, random.Random(0), [task.gold_plan]), 1, "ok")
    assert verdict_kept(ep, good)
    # A "renaming" that splits one object into two symbols changes every action's arity: the
    # validator must reject the variant's plan, and verdict_kept must notice.
    used = task.gold_plan.split()[1]  # first argument of the first plan step
    assert used in objs
    broken = Variant({used: f"{used} {objs[0]}"}, 1, "bad")
    assert not verdict_kept(ep, broken)


def test_augment_examples_adds_renamed_states():
    task = load_tasks("planbench:logistics:1")[0]
    ep = _episode(task, task.gold_plan)
    examples = select_examples([ep])
    extra, rejected = augment_examples(examples, [ep], copies=2, seed=1)
    assert rejected == 0 and len(extra) == 2
    assert all(e.augmentation.startswith("aug") and e.agent_id == 16 for e in extra)
    assert len({e.example_id for e in extra + examples}) == 3

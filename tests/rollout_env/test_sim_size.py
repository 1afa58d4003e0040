"""The simulated draft is size-aware: a larger task gets more faults and weaker repairs, and a task
at or below the reference size is drafted exactly as by the size-blind world."""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import mean

import pytest

from rollout.pddl.sexpr import parse
from rollout.sim import Fault, SimConfig, SimWorld
from rollout.sim.size import size_excess, task_size
from rollout.tasks import Task, load_tasks
from rollout.tasks.loaders import DATA

BW_DOMAIN = (DATA / "planbench" / "blocksworld" / "domain.pddl").read_text()
# every draft has PDDL faults drawn (no empty start), and draws no latency sleep
DRAFTING = SimConfig(empty_start_prob=0.0, latency_scale=0.0)
BLIND = replace(DRAFTING, size_extra_faults=0.0, size_repair_decay=0.0)
SEEDS = range(150)


def tower(blocks: int) -> Task:
    """Blocksworld: every block on the table, the goal a tower of all of them (2(n-1) steps)."""
    names = [f"b{i}" for i in range(blocks)]
    init = " ".join(f"(ontable {b}) (clear {b})" for b in names)
    goal = " ".join(f"(on {a} {b})" for a, b in zip(names, names[1:], strict=False))
    plan = "".join(f"(pick-up {a})\n(stack {a} {b})\n" for a, b in reversed(list(zip(names, names[1:], strict=False))))
    problem = (f"(define (problem tower-{blocks}) (:domain blocksworld-4ops) (:objects {' '.join(names)})"
               f" (:init (handempty) {init}) (:goal (and {goal})))")
    return Task(task_id=f"test/tower-{blocks}", family="test", domain_name="blocksworld", description="",
                gold_domain=BW_DOMAIN, gold_problem=problem, gold_plan=plan)


def drafts(task: Task, config: SimConfig) -> list[tuple[list[Fault], str, float]]:
    out = []
    for seed in SEEDS:
        world = SimWorld(task, config, seed=seed)
        draft = world.draft()
        out.append((list(world.faults), draft.plan, world.rng.random()))  # the next draw: same RNG path
    return out


def test_task_size_is_read_from_the_task() -> None:
    by_id = {t.task_id: t for t in load_tasks("bundled")}
    depots = by_id["planbench/depots/instance-5"]  # 18 objects, 3 goal atoms, 16 plan steps
    assert task_size(parse(depots.gold_problem), depots.gold_plan) == pytest.approx((18 * 3 * 16) ** (1 / 3))
    logistics = by_id["classical/logistics/probLOGISTICS-4-1"]  # no gold plan: objects and goal atoms
    assert task_size(parse(logistics.gold_problem), None) == pytest.approx(math.sqrt(15 * 4))
    assert SimWorld(tower(6), DRAFTING).size == pytest.approx((6 * 5 * 10) ** (1 / 3))


def test_the_excess_is_a_power_of_the_log_ratio_above_the_reference() -> None:
    assert size_excess(3.0, 4.0) == size_excess(4.0, 4.0) == 0.0
    assert size_excess(16.0, 4.0, 1.0) == pytest.approx(math.log(4))
    assert size_excess(16.0, 4.0, 0.5) == pytest.approx(math.sqrt(math.log(4)))
    assert size_excess(16.0, 0.0) == 0.0  # no reference: size-blind


def test_at_or_below_the_reference_the_draft_is_the_size_blind_one() -> None:
    small, large = tower(3), tower(20)  # sizes 2.9 (below the reference) and 23.7
    assert SimWorld(small, DRAFTING).size < DRAFTING.size_reference < SimWorld(large, DRAFTING).size
    assert SimWorld(small, DRAFTING).size_excess == 0.0
    assert drafts(small, DRAFTING) == drafts(small, BLIND)
    # a large task with the reference set to its own size: exactly the size-blind world too
    at_ref = replace(DRAFTING, size_reference=SimWorld(large, DRAFTING).size)
    assert drafts(large, at_ref) == drafts(large, BLIND)


def test_mean_draft_faults_grow_with_size() -> None:
    sizes = [3, 12, 24, 48]  # task sizes 2.9, 14.3, 29.4, 59.6: below, then above the reference
    means = [mean(len(faults) for faults, _, _ in drafts(tower(n), DRAFTING)) for n in sizes]
    blind = [mean(len(faults) for faults, _, _ in drafts(tower(n), BLIND)) for n in sizes]
    assert means[0] == blind[0]
    assert means[1] < means[2] < means[3], means
    assert means[3] > blind[3] + 1.0, (means, blind)  # 59.6 is 15x the reference


def test_repairs_succeed_less_often_on_a_larger_task() -> None:
    def repaired(task: Task, config: SimConfig) -> int:
        count = 0
        for seed in SEEDS:
            world = SimWorld(task, config, seed=seed)
            world.faults = [Fault("missing_init_fact", {"index": 0})]
            count += world._try_repair(20, 0.0) is not None  # agent 20 is its first repairer
        return count

    large = tower(48)
    assert repaired(tower(3), DRAFTING) == repaired(tower(3), BLIND)
    assert repaired(large, DRAFTING) < repaired(large, BLIND)

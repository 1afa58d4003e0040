"""Every fault class: the real symptom it produces in the real planner/validator, and the agent
that repairs it (simulated LLM agents for PDDL faults, the real deterministic agents for plans)."""

from __future__ import annotations

import asyncio
import random

import pytest
from rollout_env_helpers import context, evaluated_state, world_with

from rollout.agents.base import make_agent
from rollout.core.state import EpisodeState
from rollout.loop.oracle import check_plan
from rollout.sim import CATALOG, PDDL_FAULTS, PLAN_FAULTS, Fault
from rollout.sim.faults import corrupt_plan
from rollout.tasks import load_tasks

BW2 = "planbench/blocksworld/instance-2"  # gold plan: (unstack d c) (put-down d) (pick-up c) (stack c a)
DEPOTS = "planbench/depots/instance-2"

# fault -> (task, explicit params, use the drafted gold plan?, check on the symptom state)
PDDL_CASES = {
    "syntax_domain": (BW2, {"style": "drop_paren", "where": 0.5}, True,
                      lambda s: s.error_category == "parse_error_domain" and "[parse." in s.validator_errors),
    "syntax_problem": (BW2, {"style": "bad_keyword", "where": 0.0}, True,
                       lambda s: s.error_category == "parse_error_problem" and "[parse." in s.validator_errors),
    "unsupported_requirement": (BW2, {"action": "pick-up", "fluent": "energy"}, False,
                                lambda s: s.error_category == "unsupported_requirement" and not s.plan_found),
    "hallucinated_predicate": (BW2, {"action": "pick-up", "predicate": "arm-ready"}, True,
                               lambda s: "[validate.precondition_failed]" in s.validator_errors
                               and "(arm-ready) is false" in s.validator_errors),
    "missing_init_fact": (BW2, {"fact": ["clear", "d"]}, True,
                          lambda s: "(clear d) is false" in s.validator_errors),
    "wrong_goal": (BW2, {"index": 0}, True, lambda s: "[validate.goal_not_reached]" in s.validator_errors),
    "broken_type_hierarchy": (DEPOTS, {"parent": "surface"}, True,
                              lambda s: "[semantic.type_mismatch]" in s.validator_errors),
    "narrow_predicate_type": (DEPOTS, {"predicate": "on", "arg": 1, "narrow_to": "pallet"}, True,
                              lambda s: "[semantic.type_mismatch]" in s.validator_errors),
    "wrong_argument_type": (DEPOTS, {"action": "drive", "arg": 1, "narrow_to": "depot"}, True,
                            lambda s: "[validate.type_mismatch]" in s.validator_errors),
}


def test_catalog_has_at_least_ten_classes_each_with_a_repairer() -> None:
    assert len(CATALOG) >= 10
    assert set(PDDL_FAULTS) | set(PLAN_FAULTS) == set(CATALOG)
    assert all(fc.repaired_by for fc in CATALOG.values())


@pytest.mark.parametrize("kind", sorted(PDDL_CASES))
def test_pddl_fault_symptom_and_repair(kind: str, tasks) -> None:
    task_id, params, with_plan, symptom = PDDL_CASES[kind]
    task = tasks[task_id]
    world = world_with(task, [Fault(kind, params)])
    domain, problem = world.render()
    state = evaluated_state(task, domain, problem, task.gold_plan if with_plan else "")
    assert not state.plan_valid
    assert symptom(state), (state.error_category, state.validator_errors, state.planner_log[-300:])

    repairer = CATALOG[kind].repaired_by[0]
    outcome = asyncio.run(make_agent(repairer).apply(state, context(task, world)))
    assert outcome.ok and outcome.llm_calls == 1 and outcome.tokens_in > 0 and outcome.cost_usd > 0
    assert world.active_fault_kinds() == []
    after = evaluated_state(task, outcome.domain, outcome.problem, "")
    assert after.plan_valid, (after.error_category, after.validator_errors)
    assert check_plan(task, after.plan).correct


def test_missing_delete_effect_is_a_silent_bookkeeping_shortcut(tasks) -> None:
    """The validator accepts the planner's plan, but it cheats: not oracle-correct. Agent 5 fixes it."""
    task = load_tasks("planbench:blocksworld:3")[2]  # instance-4
    world = world_with(task, [Fault("missing_delete_effect", {"action": "pick-up", "effect": ["not", ["handempty"]]})])
    domain, problem = world.render()
    state = evaluated_state(task, domain, problem, "")
    assert state.plan_valid
    assert check_plan(task, state.plan).correct is False
    outcome = asyncio.run(make_agent(5).apply(state, context(task, world)))
    after = evaluated_state(task, outcome.domain, outcome.problem, "")
    assert after.plan_valid and check_plan(task, after.plan).correct


# plan fault -> the symptom diagnostic(s) it may produce
PLAN_CASES = {
    "swapped_args": ("[validate.precondition_failed]",),
    "misordered_steps": ("[validate.precondition_failed]",),
    "duplicated_step": ("[validate.precondition_failed]",),
    "missing_steps": ("[validate.precondition_failed]", "[validate.goal_not_reached]"),
    "trailing_steps": ("[validate.goal_not_reached]",),
}


@pytest.mark.parametrize("kind", sorted(PLAN_CASES))
def test_plan_fault_symptom_and_deterministic_repair(kind: str, tasks) -> None:
    task = tasks["planbench/blocksworld/instance-3"]
    steps = task.gold_plan.splitlines()
    bad = corrupt_plan(steps, kind, random.Random(1))
    assert bad is not None and bad != steps
    state = evaluated_state(task, task.gold_domain, task.gold_problem, "\n".join(bad) + "\n")
    assert not state.plan_valid and state.error_category == "plan_invalid"
    assert any(code in state.validator_errors for code in PLAN_CASES[kind]), state.validator_errors

    repairer = CATALOG[kind].repaired_by[0]
    outcome = asyncio.run(make_agent(repairer).apply(state, context(task)))
    assert outcome.ok, outcome.message
    assert outcome.llm_calls == 0
    after = evaluated_state(task, state.domain, state.problem, outcome.plan)
    assert after.plan_valid, after.validator_errors
    assert check_plan(task, outcome.plan).correct


def test_wrong_agent_wastes_the_step_or_breaks_something(tasks) -> None:
    """A mis-chosen LLM agent costs a call and does not fix the fault it does not target."""
    task = tasks[BW2]
    world = world_with(task, [Fault("missing_init_fact", {"fact": ["clear", "d"]})])
    domain, problem = world.render()
    state = EpisodeState(task_description=task.description, domain=domain, problem=problem)
    outcome = asyncio.run(make_agent(9).apply(state, context(task, world)))
    assert outcome.llm_calls == 1 and outcome.cost_usd > 0
    assert world.active_fault_kinds() == ["missing_init_fact"]
    assert (outcome.domain, outcome.problem) == (domain, problem)


def test_cached_renders_equal_fresh_ones_and_do_not_leak_between_fault_sets(tasks) -> None:
    """SimWorld.render caches text per (task, faults, rename); a cached answer must be exactly what a
    fresh render gives, and a different fault set must not get another's text."""
    from rollout.sim.faults import render

    task = next(t for t in tasks.values() if t.domain_name == "blocksworld")
    world = world_with(task, [])
    clean = world.render()
    assert clean == render(world.gold_domain, world.gold_problem, [], world.rename)
    assert world.render() is clean  # the second time comes from the cache
    rng = random.Random(1)
    for kind in PDDL_FAULTS:
        params = CATALOG[kind].choose(world.gold_domain, world.gold_problem, rng)
        if params is None:
            continue
        faulty = world_with(task, [Fault(kind, params)])
        text = faulty.render()
        assert text == render(faulty.gold_domain, faulty.gold_problem, faulty.faults, faulty.rename)
        assert text != clean, kind
    assert world_with(task, []).render() == clean  # the gold trees were not changed by any render


def _print_whole_tree(edited: list, gold: list, rename: dict[str, str] | None) -> str:  # noqa: ARG001
    """The plain way to print what faults._print prints: the whole renamed tree, no reused text."""
    from rollout.pddl.printer import to_text
    from rollout.sim.faults import _rename

    return to_text(_rename(edited, rename or {}))


def test_renders_reusing_section_text_equal_whole_tree_prints(tasks, monkeypatch) -> None:
    """faults.render reuses the printed text of sections no fault changed; the result must be the
    text of printing the whole faulted, renamed tree, for every fault class, with and without
    renames, and the shared gold trees must come out of it unchanged."""
    from rollout.pddl.sexpr import parse
    from rollout.sim import faults
    from rollout.sim.faults import render

    picked = [next(t for t in tasks.values() if t.domain_name == name) for name in ("blocksworld", "depots")]
    for task in picked:
        world = world_with(task, [])
        for round_ in range(30):
            world.faults = world._sample_faults((0.0, 0.3, 0.4, 0.3))
            world.rename = world._sample_rename() if round_ % 2 else {}
            got = render(world.gold_domain, world.gold_problem, world.faults, world.rename)
            with monkeypatch.context() as patched:
                patched.setattr(faults, "_print", _print_whole_tree)
                assert got == render(world.gold_domain, world.gold_problem, world.faults, world.rename)
        assert world.gold_domain == parse(task.gold_domain)
        assert world.gold_problem == parse(task.gold_problem)


@pytest.mark.parametrize("text", [
    "(define (problem p) (:domain d) (:init (a b)) (:goal (a b)))",  # fits on one line
    "(define (domain d) (:predicates (p)) (:action a :parameters () :precondition (p) :effect (not (p))))",
    "(define (x) :keyword (y))",  # a bare keyword among the sections
    "(define)",
])
def test_section_reuse_prints_small_and_odd_defines_like_to_text(text: str) -> None:
    from rollout.pddl.printer import to_text
    from rollout.pddl.sexpr import copy_tree, parse
    from rollout.sim.faults import _print, _rename

    gold = parse(text)
    for rename in ({}, {"a": "a_obj", "p": "q"}):
        assert _print(copy_tree(gold), gold, rename) == to_text(_rename(gold, rename))


def test_parse_shared_returns_one_tree_per_text() -> None:
    from rollout.pddl.sexpr import SExprError, parse, parse_shared

    text = "(define (problem p) (:domain d) (:init (a b)) (:goal (a b)))"
    assert parse_shared(text) is parse_shared(text)
    assert parse_shared(text) == parse(text)
    with pytest.raises(SExprError):
        parse_shared("(define (problem p)")

"""The PDDL model behind the deterministic agents agrees with the real validator."""

from __future__ import annotations

import pytest

import solvers
from rollout.pddl.model import PDDLParseError, Unsupported, parse_domain
from rollout.pddl.state_space import load_world, render_problem, simulate

DOMAIN = """
(define (domain delivery)
  (:requirements :typing :negative-preconditions :conditional-effects :equality)
  (:types truck package - object  place)
  (:constants depot - place)
  (:predicates (at ?o - object ?p - place) (in ?k - package ?t - truck) (broken ?t - truck) (road ?a ?b - place))
  (:action drive
    :parameters (?t - truck ?from ?to - place)
    :precondition (and (at ?t ?from) (road ?from ?to) (not (broken ?t)) (not (= ?from ?to)))
    :effect (and (not (at ?t ?from)) (at ?t ?to)
                 (forall (?k - package) (when (in ?k ?t) (and (not (at ?k ?from)) (at ?k ?to))))))
  (:action load
    :parameters (?k - package ?t - truck ?p - place)
    :precondition (and (at ?k ?p) (at ?t ?p))
    :effect (in ?k ?t))
  (:action unload
    :parameters (?k - package ?t - truck ?p - place)
    :precondition (and (in ?k ?t) (at ?t ?p))
    :effect (not (in ?k ?t))))
"""
PROBLEM = """
(define (problem p1) (:domain delivery)
  (:objects t1 - truck k1 k2 - package shop - place)
  (:init (at t1 depot) (at k1 depot) (at k2 depot) (road depot shop) (road shop depot))
  (:goal (and (at k1 shop) (at k2 depot) (not (in k1 t1)))))
"""
GOOD = [("load", ("k1", "t1", "depot")), ("drive", ("t1", "depot", "shop")), ("unload", ("k1", "t1", "shop"))]


def text(plan):
    return "".join("(" + " ".join((n, *a)) + ")\n" for n, a in plan)


@pytest.mark.parametrize("plan", [
    GOOD,
    GOOD[1:],  # unload without load: precondition fails
    [("drive", ("k1", "depot", "shop"))],  # wrong type
    GOOD[:2],  # k1 still in the truck: goal fails
    [("drive", ("t1", "depot", "depot"))],  # equality
])
def test_simulator_agrees_with_validator(plan):
    world = load_world(DOMAIN, PROBLEM)
    sim = simulate(world, plan)
    verdict = solvers.validate(DOMAIN, PROBLEM, text(plan))
    assert sim.valid == verdict.valid
    if sim.valid:
        assert sim.states[-1] >= {("at", "k1", "shop"), ("at", "k2", "depot")}


def test_conditional_effect_moves_loaded_package():
    world = load_world(DOMAIN, PROBLEM)
    sim = simulate(world, GOOD[:2])
    assert ("at", "k1", "shop") in sim.states[2] and ("at", "k2", "depot") in sim.states[2]


def test_render_problem_round_trips_through_planner():
    world = load_world(DOMAIN, PROBLEM)
    sub = render_problem(world, simulate(world, GOOD[:1]).states[1], ["and", ["at", "t1", "shop"]])
    result = solvers.plan(DOMAIN, sub)
    assert result.ok and [s.name for s in result.plan] == ["drive"]


def test_errors_are_typed():
    with pytest.raises(PDDLParseError, match="unbalanced"):
        parse_domain("(define (domain d) (:predicates (p)")
    with pytest.raises(PDDLParseError, match="after the closing"):
        parse_domain("(define (domain d)) (extra)")
    with pytest.raises(Unsupported):
        parse_domain("(define (domain d) (:durative-action a :parameters () :duration (= ?duration 1)))")


def test_numeric_conditions_are_unsupported_not_misread():
    numeric = ("(define (domain n) (:requirements :numeric-fluents) (:functions (fuel))"
               " (:action go :parameters () :precondition (> (fuel) 0) :effect (decrease (fuel) 1)))")
    with pytest.raises(Unsupported, match="numeric"):
        parse_domain(numeric)


def _all_plans(length: int) -> list[list[tuple[str, tuple[str, ...]]]]:
    """Every plan of `length` steps over a few steps of the delivery world, good and bad."""
    steps = [*GOOD, ("load", ("k2", "t1", "depot")), ("drive", ("t1", "shop", "depot")),
             ("drive", ("k1", "depot", "shop")), ("fly", ("t1",))]
    plans: list[list[tuple[str, tuple[str, ...]]]] = [[]]
    for _ in range(length):
        plans = [p + [s] for p in plans for s in steps]
    return plans


def test_remembered_transitions_give_what_a_fresh_world_computes(monkeypatch):
    """A World remembers transitions and goal tests across plans (and, via load_world, across
    callers); every answer must equal a fresh, memo-free world's, also once the memo starts over."""
    from rollout.pddl import state_space as simulator
    from rollout.pddl.model import parse_problem
    from rollout.pddl.state_space import NotApplicable, World

    monkeypatch.setattr(simulator, "MEMO_MAX", 50)  # also exercise the start-over path
    shared = load_world(DOMAIN, PROBLEM)
    for plan in _all_plans(3):
        fresh = World(parse_domain(DOMAIN), parse_problem(PROBLEM))
        got, want = simulate(shared, plan), simulate(fresh, plan)
        assert got == want
        assert shared.goal_atoms_satisfied(got.states[-1]) == fresh.goal_atoms_satisfied(want.states[-1])
        assert [shared.goal_reached(s) for s in got.states] == [fresh.goal_reached(s) for s in want.states]
    state = shared.problem.init
    for _ in range(2):  # the remembered failure raises again, with the same reason
        with pytest.raises(NotApplicable, match=r"precondition of \(unload k1 t1 depot\) is false"):
            shared.apply(state, "unload", ["k1", "t1", "depot"])
        with pytest.raises(NotApplicable, match="unknown action fly"):
            shared.apply(state, "fly", ("t1",))
    assert len(shared._transitions) <= 50


def test_load_world_is_shared_per_text_pair_and_left_unchanged_by_simulation():
    from rollout.pddl.model import parse_problem
    from rollout.pddl.state_space import World

    world = load_world(DOMAIN, PROBLEM)
    assert load_world(DOMAIN, PROBLEM) is world
    assert load_world(DOMAIN, PROBLEM.replace("p1", "p2")) is not world
    for plan in _all_plans(2):
        simulate(world, plan)
    assert world == World(parse_domain(DOMAIN), parse_problem(PROBLEM))  # the memos do not compare
    with pytest.raises(PDDLParseError):  # errors are raised again, not remembered as a world
        load_world(DOMAIN, "(define (problem p")
    with pytest.raises(PDDLParseError):
        load_world(DOMAIN, "(define (problem p")


def test_added_atoms_are_the_effects_a_step_adds_in_that_state():
    from rollout.pddl.model import parse_problem
    from rollout.pddl.state_space import World

    shared = load_world(DOMAIN, PROBLEM)
    fresh = World(parse_domain(DOMAIN), parse_problem(PROBLEM))
    for plan in _all_plans(2):
        states = simulate(fresh, plan).states
        for state in states:
            for name, args in plan:
                try:
                    act, binding = fresh.bind(name, args)
                except KeyError:
                    with pytest.raises(KeyError):
                        shared.added_atoms(state, name, args)
                    continue
                adds: set = set()
                fresh.effects(act.effect, state, binding, adds, set())
                assert shared.added_atoms(state, name, args) == adds
    loaded = simulate(fresh, GOOD[:1]).states[1]  # the conditional effect moves k1 only once loaded
    assert ("at", "k1", "shop") in shared.added_atoms(loaded, "drive", ("t1", "depot", "shop"))
    assert ("at", "k1", "shop") not in shared.added_atoms(fresh.problem.init, "drive", ("t1", "depot", "shop"))


def test_worlds_of_one_domain_text_share_the_parsed_domain():
    other = PROBLEM.replace("(road shop depot)", "")
    assert load_world(DOMAIN, other).domain is load_world(DOMAIN, PROBLEM).domain
    assert load_world(DOMAIN, other).problem != load_world(DOMAIN, PROBLEM).problem

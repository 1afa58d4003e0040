"""Delete-relaxed goal reachability (train/reachability.py) and the fast-policy features read from it."""

from __future__ import annotations

from rollout.core.state import EpisodeState
from rollout.pddl.state_space import load_world
from train.features import state_features
from train.reachability import goal_reachability, relaxed_reachable

BLOCKS = """(define (domain blocks)
  (:predicates (on ?x ?y) (ontable ?x) (clear ?x) (handempty) (holding ?x))
  (:action pick-up :parameters (?x) :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (not (ontable ?x)) (not (clear ?x)) (not (handempty)) (holding ?x)))
  (:action put-down :parameters (?x) :precondition (holding ?x)
    :effect (and (not (holding ?x)) (clear ?x) (handempty) (ontable ?x)))
  (:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y))
    :effect (and (not (holding ?x)) (not (clear ?y)) (clear ?x) (handempty) (on ?x ?y)))
  (:action unstack :parameters (?x ?y) :precondition (and (on ?x ?y) (clear ?x) (handempty))
    :effect (and (holding ?x) (clear ?y) (not (clear ?x)) (not (handempty)) (not (on ?x ?y)))))"""


def problem(init: str, goal: str) -> str:
    return f"(define (problem p) (:domain blocks) (:objects a b c) (:init {init}) (:goal (and {goal})))"


FULL_INIT = "(handempty) (ontable a) (ontable b) (on c a) (clear b) (clear c)"


def test_a_missing_initial_fact_makes_the_goal_unreachable_a_contradictory_goal_does_not():
    assert goal_reachability(BLOCKS, problem(FULL_INIT, "(on a b) (on b c)")) == "reachable"
    # without (handempty) nothing can be picked up: no relaxed plan reaches (on a b)
    assert goal_reachability(BLOCKS, problem(FULL_INIT.replace("(handempty)", ""), "(on a b)")) == "unreachable"
    # (on a b) and (on b a) cannot hold together, but each is reachable once deletes are ignored
    assert goal_reachability(BLOCKS, problem(FULL_INIT, "(on a b) (on b a)")) == "reachable"


def test_types_constants_forall_and_conditional_effects():
    domain = """(define (domain d) (:requirements :typing :conditional-effects)
      (:types truck place - object)
      (:constants depot - place)
      (:predicates (at ?t - truck ?p - place) (road ?a ?b - place) (visited ?p - place) (flag))
      (:action drive :parameters (?t - truck ?a ?b - place) :precondition (and (at ?t ?a) (road ?a ?b))
        :effect (and (not (at ?t ?a)) (at ?t ?b) (when (at ?t depot) (flag))))
      (:action mark :parameters (?t - truck) :precondition (at ?t depot)
        :effect (forall (?p - place) (visited ?p))))"""
    prob = ("(define (problem p) (:domain d) (:objects t1 - truck x y - place) "
            "(:init (at t1 x) (road x depot)) (:goal (and {})))")
    reached = relaxed_reachable(load_world(domain, prob.format("(at t1 depot)")))
    assert reached is not None and {("at", "t1", "depot"), ("flag",), ("visited", "y")} <= reached
    assert ("at", "t1", "y") not in reached  # no road leads to y
    assert goal_reachability(domain, prob.format("(visited x) (flag)")) == "reachable"
    assert goal_reachability(domain, prob.format("(at t1 y)")) == "unreachable"
    # (road depot x) is not, (road x depot) is: a goal atom written the wrong way round
    assert goal_reachability(domain, prob.format("(road depot x)")) == "unreachable_reversed_reachable"
    assert goal_reachability(domain, prob.format("(road depot x) (at t1 y)")) == "unreachable"


def test_unparsable_pddl_or_an_exhausted_budget_is_unknown():
    assert goal_reachability("(define (domain", problem(FULL_INIT, "(on a b)")) == "unknown"
    world = load_world(BLOCKS, problem(FULL_INIT, "(on a b)"))
    assert relaxed_reachable(world, max_bindings=3) is None


def test_features_read_reachability_and_where_a_problem_diagnostic_points():
    unreachable = problem(FULL_INIT.replace("(handempty)", ""), "(on a b)")
    solver_ran = EpisodeState("t", domain=BLOCKS, problem=unreachable, error_category="unsolvable_proved")
    assert "relaxed_goal=unreachable" in state_features(solver_ran)
    # a parse error: the planner did not run, the read is not made
    parse = EpisodeState("t", domain=BLOCKS, problem=unreachable, error_category="parse_error_problem")
    assert not any(f.startswith("relaxed_goal=") for f in state_features(parse))

    text = problem(FULL_INIT, "(on a b)").replace("(:goal", "\n(:goal")  # the goal on line 2
    error = "problem.pddl:{}: error: argument 'a' is of type x [semantic.type_mismatch]"
    at_goal = EpisodeState("t", domain=BLOCKS, problem=text, error_category="parse_error_problem",
                           validator_errors=error.format("2:12"))
    at_init = EpisodeState("t", domain=BLOCKS, problem=text, error_category="parse_error_problem",
                           validator_errors=error.format("1:70"))
    assert "diag_section=goal" in state_features(at_goal)
    assert "diag_section=init" in state_features(at_init)

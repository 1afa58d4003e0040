"""Random and scripted policies, the factory, and the rules layer over visible symptoms."""

from __future__ import annotations

import pytest

from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.policies import PolicySpecError, make_policy, register_policy_factory
from rollout.policies.random import RandomPolicy
from rollout.policies.rules import RulesFirst, rule_decision
from rollout.policies.scripted import DEFAULT_RULES, ScriptedPolicy, symptom
from rollout.tasks import load_tasks

BW = load_tasks("planbench:blocksworld:1")[0]


def state(**kw) -> EpisodeState:
    base = {"task_description": "t", "domain": BW.gold_domain, "problem": BW.gold_problem}
    return EpisodeState(**{**base, **kw})


def test_make_policy_specs() -> None:
    assert isinstance(make_policy("random"), RandomPolicy)
    scripted = make_policy("scripted:noise=0.25,seed=4")
    assert isinstance(scripted, ScriptedPolicy) and scripted.noise == 0.25 and scripted.seed == 4
    wrapped = make_policy("rules+scripted")
    assert isinstance(wrapped, RulesFirst) and wrapped.name == "rules+scripted"
    assert make_policy("rules+random").name == "rules+random"


@pytest.mark.parametrize("spec, message", [
    ("nosuch", "unknown policy"),
    ("scripted:noise", "key=value"),
    ("scripted:noise=2", "noise must be in"),
    ("scripted:noise=abc", "noise must be a number"),
])
def test_bad_policy_specs(spec: str, message: str) -> None:
    with pytest.raises(PolicySpecError, match=message):
        make_policy(spec)


def test_register_policy_factory_hook() -> None:
    class Always(Policy):
        name = "always3"

        def _decide(self, s: EpisodeState) -> Decision:
            return Decision(3, "model")

    register_policy_factory("always3", lambda params, seed: Always())
    assert make_policy("rules+always3").decide(state()).agent_id == 3
    assert make_policy("rules+always3").decide(state(domain="")).agent_id == 2


def test_random_policy_is_a_function_of_seed_and_state() -> None:
    s = state(step=2, history=[1, 4])
    picks = {RandomPolicy(seed=5).decide(s).agent_id for _ in range(5)}
    assert len(picks) == 1
    spread = {RandomPolicy(seed=k).decide(s).agent_id for k in range(60)}
    assert len(spread) > 8 and 12 not in spread


def test_rules_layer() -> None:
    assert rule_decision(state(domain="")).agent_id == 2
    assert rule_decision(state(plan_valid=True)).agent_id == 11
    assert rule_decision(state(error_category="parse_error_problem")).agent_id == 9
    assert rule_decision(state(validator_errors="x.pddl:3:1: error: y [parse.unexpected_end]")).agent_id == 9
    assert rule_decision(state(error_category="plan_invalid")) is None
    # the strict check's semantic diagnostics share the parse-error categories; they are not syntax
    semantic = "problem.pddl:42:17: error: argument 'd0' of predicate 'at' is of type x, not y [semantic.type_mismatch]"
    assert rule_decision(state(error_category="parse_error_problem", validator_errors=semantic)) is None
    assert rule_decision(state(error_category="parse_error_domain", planner_log=semantic + "\n[parse.unknown_key]")
                         ).agent_id == 9
    # rules win over the inner policy and are marked hardcoded; the rest goes to the inner policy
    pol = make_policy("rules+scripted:noise=1.0")
    d = pol.decide(state(plan_valid=True))
    assert d.agent_id == 11 and d.is_hardcoded
    assert not pol.decide(state(error_category="plan_invalid")).is_hardcoded


PRECOND = "plan.txt:2: error: step 2 (unstack c d) at 1.000: precondition false: (on c d) is false " \
          "[validate.precondition_failed]"


@pytest.mark.parametrize("kw, expected", [
    ({"domain": ""}, "empty_domain"),
    ({"plan_valid": True}, "valid"),
    ({"error_category": "parse_error_domain"}, "syntax"),
    ({"error_category": "unsupported_requirement"}, "unsupported"),
    ({"error_category": "plan_invalid", "validator_errors": "x [semantic.type_mismatch]"}, "type_error"),
    ({"error_category": "plan_invalid", "validator_errors": "x [validate.type_mismatch]"}, "action_type_error"),
    ({"error_category": "plan_invalid", "validator_errors": PRECOND, "plan": "(a)\n(unstack c d)\n"},
     "precondition_failed"),
    ({"error_category": "plan_invalid", "validator_errors": PRECOND, "plan": "(unstack c d)\n(unstack c d)\n"},
     "repeated_step"),
    ({"error_category": "plan_invalid",
      "validator_errors": "step 1 (a) at 0.000: precondition false: (ready) is false [validate.precondition_failed]"},
     "precondition_failed_undeclared_looking"),
    ({"error_category": "plan_invalid", "validator_errors": "x [validate.goal_not_reached]"}, "goal_not_reached"),
    ({"error_category": "unsolvable_proved"}, "unsolvable"),
    ({"error_category": "search_timeout"}, "no_plan"),
    ({"error_category": "solver_crash"}, "crash"),
])
def test_symptoms(kw: dict, expected: str) -> None:
    assert symptom(state(**kw)) == expected


GOAL_PROBLEM = ("(define (problem p) (:domain d)\n  (:objects a - x b - y)\n  (:init (at a b))\n"
                "  (:goal (and (at b a))))\n")


@pytest.mark.parametrize("where, expected", [
    ("problem.pddl:4:20", "goal_type_error"),  # the goal atom's arguments the wrong way round
    ("problem.pddl:3:10", "type_error"),  # an initial fact: the predicate's type may be too narrow
    ("problem.pddl:1:60", "type_error"),  # before the goal on a one-line problem (the column counts)
    ("domain.pddl:9:4", "type_error"),
])
def test_a_type_mismatch_in_the_goal_is_its_own_symptom(where: str, expected: str) -> None:
    error = f"{where}: error: argument 'b' of predicate 'at' is of type y, not x [semantic.type_mismatch]"
    problem = GOAL_PROBLEM if where != "problem.pddl:1:60" else GOAL_PROBLEM.replace("\n", " ")
    seen = state(error_category="parse_error_problem", validator_errors=error, problem=problem)
    assert symptom(seen) == expected
    if expected == "goal_type_error":  # the constraints agent (4) repairs goals; the type fixers do not
        assert ScriptedPolicy(noise=0.0).decide(seen).agent_id == 4


def test_scripted_walks_down_its_candidates_while_the_symptom_persists() -> None:
    pol = ScriptedPolicy(noise=0.0)
    cands = DEFAULT_RULES["precondition_failed"]
    s = state(error_category="plan_invalid", validator_errors=PRECOND, plan="(a)\n(unstack c d)\n")
    assert pol.decide(s).agent_id == cands[0]
    s.history = [cands[0]]
    assert pol.decide(s).agent_id == cands[1]
    s.history = [cands[0], cands[1]]
    assert pol.decide(s).agent_id == cands[2]


def test_scripted_noise_and_custom_rules() -> None:
    s = state(error_category="unsolvable_proved")
    noisy = {ScriptedPolicy(noise=1.0, seed=k).decide(s).agent_id for k in range(40)}
    assert len(noisy) > 5
    custom = ScriptedPolicy(noise=0.0, rules={"unsolvable": (8,)})
    assert custom.decide(s).agent_id == 8
    with pytest.raises(ValueError, match="unknown agent IDs"):
        ScriptedPolicy(rules={"unsolvable": (42,)})


def test_cheap_policies_decide_in_the_event_loop_and_blocking_ones_in_a_thread() -> None:
    import asyncio
    import threading

    class Recording(Policy):
        def __init__(self, inline: bool) -> None:
            self.decides_inline = inline
            self.thread: threading.Thread | None = None

        def _decide(self, s: EpisodeState) -> Decision:
            self.thread = threading.current_thread()
            return Decision(3, "model")

    async def decide_both() -> threading.Thread:
        for policy in (inline, blocking):
            assert (await RulesFirst(policy).adecide(state())).agent_id == 3
        return threading.current_thread()

    inline, blocking = Recording(True), Recording(False)
    loop_thread = asyncio.run(decide_both())
    assert inline.thread is loop_thread
    assert blocking.thread is not None and blocking.thread is not loop_thread
    assert ScriptedPolicy().decides_inline and RandomPolicy().decides_inline

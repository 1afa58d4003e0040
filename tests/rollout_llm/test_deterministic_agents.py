"""Agents 13-17 on crafted broken plans; every repaired plan is re-checked by the real validator."""

from __future__ import annotations

import asyncio

import pytest

import solvers
from rollout.agents.base import make_agent
from rollout.core.state import EpisodeState
from tests.rollout_llm.conftest import make_ctx

BW_GOLD = ["(unstack d c)", "(put-down d)", "(pick-up c)", "(stack c a)"]


def run_agent(agent_id: int, domain: str, problem: str, plan: list[str], **extras):
    text = "\n".join(plan) + "\n"
    verdict = solvers.validate(domain, problem, text)
    state = EpisodeState("task", domain=domain, problem=problem, plan=text, plan_found=True,
                         plan_valid=verdict.valid, validator_errors=verdict.output_tail,
                         error_category=verdict.category.value)
    return verdict, asyncio.run(make_agent(agent_id).apply(state, make_ctx(**extras)))


def assert_repaired(outcome, domain: str, problem: str) -> list[str]:
    assert outcome.ok, outcome.message
    assert solvers.validate(domain, problem, outcome.plan).valid
    return [line.strip() for line in outcome.plan.splitlines() if line.strip()]


def test_variable_swapper_fixes_two_swapped_steps(blocksworld):
    d, p = blocksworld
    broken = ["(unstack c d)", "(put-down d)", "(pick-up c)", "(stack a c)"]
    before, out = run_agent(13, d, p, broken)
    assert not before.valid
    assert assert_repaired(out, d, p) == BW_GOLD
    assert "swapped arguments" in out.message and out.solver_cpu_s > 0


def test_variable_swapper_logistics(logistics):
    d, p = logistics
    gold = solvers.plan(d, p).plan_text.splitlines()
    broken = list(gold)
    broken[2] = "(drive-truck tru2 apt2 pos2 cit2)"  # from/to swapped
    before, out = run_agent(13, d, p, broken)
    assert not before.valid
    assert assert_repaired(out, d, p) == gold


def test_reorderer_dependency_swap(blocksworld):
    d, p = blocksworld
    broken = ["(unstack d c)", "(pick-up c)", "(put-down d)", "(stack c a)"]
    before, out = run_agent(14, d, p, broken)
    assert not before.valid
    assert assert_repaired(out, d, p) == BW_GOLD


def test_reorderer_circular_shift(logistics):
    d, p = logistics
    gold = solvers.plan(d, p).plan_text.splitlines()
    rotated = gold[5:] + gold[:5]
    before, out = run_agent(14, d, p, rotated)
    assert not before.valid
    assert_repaired(out, d, p)
    assert "circular shift" in out.message


def test_redundancy_stripper_duplicate_and_undone(blocksworld):
    d, p = blocksworld
    broken = ["(unstack d c)", "(unstack d c)", "(put-down d)", "(pick-up d)", "(put-down d)",
              "(pick-up c)", "(stack c a)"]
    before, out = run_agent(15, d, p, broken)
    assert not before.valid
    assert assert_repaired(out, d, p) == BW_GOLD


def test_redundancy_stripper_shortens_valid_plan(logistics):
    d, p = logistics
    gold = solvers.plan(d, p).plan_text.splitlines()
    padded = gold[:3] + ["(drive-truck tru1 pos1 apt1 cit1)", "(drive-truck tru1 apt1 pos1 cit1)"] + gold[3:]
    before, out = run_agent(15, d, p, padded)
    assert before.valid
    assert len(assert_repaired(out, d, p)) == len(gold)


def test_truncator_cuts_after_goal(blocksworld):
    d, p = blocksworld
    broken = BW_GOLD + ["(unstack c a)", "(stack b c)"]
    before, out = run_agent(16, d, p, broken)
    assert not before.valid
    assert assert_repaired(out, d, p) == BW_GOLD
    assert "after step 4 of 6" in out.message


def test_subplan_filler_bridges_missing_steps(logistics):
    d, p = logistics
    gold = solvers.plan(d, p).plan_text.splitlines()
    broken = [s for s in gold if not s.startswith("(drive-truck tru2") and not s.startswith("(fly-airplane")]
    before, out = run_agent(17, d, p, broken)
    assert not before.valid
    repaired = assert_repaired(out, d, p)
    assert any(s.startswith("(fly-airplane") for s in repaired)
    assert "inserted" in out.message


@pytest.mark.parametrize("agent_id", [13, 14, 15, 16, 17])
def test_bad_input_is_a_failed_step_not_a_crash(agent_id, blocksworld):
    d, p = blocksworld
    for domain, plan, expect in ((d, "", "no plan"), (d, "this is not a plan", "does not parse"),
                                 ("(define (domain x", "(pick-up a)\n", "cannot read")):
        state = EpisodeState("task", domain=domain, problem=p, plan=plan)
        out = asyncio.run(make_agent(agent_id).apply(state, make_ctx()))
        assert not out.ok and expect in out.message
        assert out.domain == domain and out.plan == ""


def test_budget_exhaustion_is_reported(blocksworld):
    d, p = blocksworld
    _, out = run_agent(13, d, p, ["(unstack c d)", "(put-down d)", "(pick-up c)", "(stack a c)"],
                       deterministic={"max_evaluations": 1})
    assert not out.ok and "budget" in out.message


def _derived_blocksworld(domain: str) -> str:
    """Blocksworld with a derived predicate, which the simulator does not model."""
    return (domain.replace("(:requirements :strips)", "(:requirements :strips :derived-predicates)")
            .replace("(on ?x ?y))", "(on ?x ?y)\n (free ?x))\n(:derived (free ?x) (clear ?x))", 1))


def test_validator_only_search_when_simulator_cannot_model_domain(blocksworld):
    d, p = blocksworld
    d2 = _derived_blocksworld(d)
    before, out = run_agent(13, d2, p, ["(unstack c d)", "(put-down d)", "(pick-up c)", "(stack c a)"])
    assert not before.valid
    assert assert_repaired(out, d2, p) == BW_GOLD
    before, out = run_agent(16, d2, p, BW_GOLD + ["(unstack c a)"])
    assert assert_repaired(out, d2, p) == BW_GOLD
    _, out = run_agent(17, d2, p, BW_GOLD[1:])
    assert not out.ok and "needs the plan simulator" in out.message

"""Every IPC fixture domain solves and validates; a corrupted plan fails at the right step."""

from __future__ import annotations

import pytest
from solver_helpers import IPC, TEMPORAL, ipc_cases

import solvers
from solvers import fd
from solvers.results import ErrorCategory

CASES = ipc_cases()


@pytest.mark.parametrize(("domain_name", "domain", "problem"), CASES, ids=[f"{c[0]}-{c[2].stem}" for c in CASES])
def test_ipc_fixture_solves_validates_and_rejects_a_corrupted_plan(domain_name, domain, problem):
    domain_text, problem_text = domain.read_text(), problem.read_text()
    result = solvers.plan(domain_text, problem_text, limits=solvers.Limits(timeout_s=30))
    assert result.category is ErrorCategory.OK, (result.message, result.output_tail[-1500:])
    assert result.plan and result.cost is not None and result.cost >= len(result.plan) * 0 + 0
    verdict = solvers.validate(domain_text, problem_text, result.plan_text)
    assert verdict.valid and verdict.category is ErrorCategory.OK, verdict

    # Repeat step j right after itself: every action of these domains deletes one of its own
    # preconditions, so the copy (step j+1) cannot apply, and the validator must say so there.
    j = max(1, len(result.plan) // 2)
    corrupted = result.plan[:j] + [result.plan[j - 1]] + result.plan[j:]
    bad = solvers.validate(domain_text, problem_text, solvers.plan_to_text(corrupted))
    assert not bad.valid
    assert bad.category is ErrorCategory.PLAN_INVALID, bad
    assert bad.failing_step == j + 1, bad
    step = result.plan[j - 1]
    assert bad.failing_action == "(" + " ".join((step.name, *step.args)) + ")"
    assert bad.unsatisfied, bad


def test_features_are_covered_by_the_fixtures():
    def text(name: str) -> str:
        return (IPC / name / "domain.pddl").read_text().lower()

    assert ":action-costs" in text("elevators") or "total-cost" in text("elevators")
    assert ":derived" in text("psr-middle")
    assert "when" in text("briefcaseworld")
    assert ":negative-preconditions" in text("snake")


def test_action_costs_give_the_plan_cost_not_its_length():
    domain = (IPC / "elevators" / "domain.pddl").read_text()
    problem = (IPC / "elevators" / "p01.pddl").read_text()
    result = solvers.plan(domain, problem)
    assert result.ok and result.cost is not None
    assert result.cost != len(result.plan)  # elevators' moves cost more than 1


def test_optimal_configuration_is_no_worse_than_lama_first():
    domain = (IPC / "elevators" / "domain.pddl").read_text()
    problem = (IPC / "elevators" / "p01.pddl").read_text()
    lama = solvers.plan(domain, problem)
    optimal = solvers.plan(domain, problem, alias="seq-opt-lmcut", limits=solvers.Limits(timeout_s=60))
    raw = solvers.plan(domain, problem, search="astar(lmcut())", limits=solvers.Limits(timeout_s=60))
    assert optimal.ok and raw.ok and lama.ok
    assert optimal.cost == raw.cost <= lama.cost


@pytest.mark.parametrize("name", ["blocksworld", "elevators", "psr-middle"])
def test_fast_path_matches_the_stock_driver(name):
    domain_dir = IPC / name
    problem = sorted(p for p in domain_dir.glob("*.pddl") if p.name != "domain.pddl")[0]
    domain_text, problem_text = (domain_dir / "domain.pddl").read_text(), problem.read_text()
    fast = solvers.plan(domain_text, problem_text)
    stock = fd.run_stock_driver(domain_text, problem_text)
    assert fast.ok and stock.ok, (fast.message, stock.output_tail[-800:])
    assert fast.cost == stock.cost
    assert fast.plan == stock.plan


@pytest.mark.parametrize("name", ["rovers", "satellite"])
@pytest.mark.parametrize("instance", ["instance-1", "instance-2"])
def test_temporal_domains_solve_and_validate(name, instance):
    domain = (TEMPORAL / name / "domain.pddl").read_text()
    problem = (TEMPORAL / name / f"{instance}.pddl").read_text()
    result = solvers.plan(domain, problem, planner="temporal")
    assert result.ok, (result.message, result.output_tail[-800:])
    assert result.planner == solvers.temporal_planner()
    assert all(step.start is not None and step.duration is not None for step in result.plan)
    makespan = max(step.start + step.duration for step in result.plan)
    assert result.cost == pytest.approx(makespan, abs=1e-3)
    verdict = solvers.validate(domain, problem, result.plan_text)
    assert verdict.valid, verdict
    # Start the last action before the first one: its conditions cannot hold at time 0.
    late = result.plan[-1]
    moved = [type(late)(late.name, late.args, 0.0, late.duration)] + result.plan[:-1]
    assert not solvers.validate(domain, problem, solvers.plan_to_text(moved)).valid


def test_fd_refuses_durative_actions_with_a_category():
    domain = (TEMPORAL / "rovers" / "domain.pddl").read_text()
    problem = (TEMPORAL / "rovers" / "instance-1.pddl").read_text()
    result = solvers.plan(domain, problem, planner="fd")
    assert result.category is ErrorCategory.UNSUPPORTED_REQUIREMENT
    assert "temporal" in result.message

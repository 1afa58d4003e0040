"""The strict static check: ill-formed PDDL is a parse error for both planners and for validate,
and no well-formed task of the fixtures (or their plans' verdicts) changes."""

from __future__ import annotations

import pytest
from solver_helpers import FIXTURES, IPC

import solvers
from solvers import pddl_check
from solvers.results import ErrorCategory

DOMAIN = """(define (domain courier)
  (:requirements :strips :typing)
  (:types place parcel - object van)
  (:constants depot - place)
  (:predicates (at-van ?v - van ?p - place) (at ?x - parcel ?p - place) (in ?x - parcel ?v - van))
  (:action drive :parameters (?v - van ?from ?to - place)
    :precondition (at-van ?v ?from)
    :effect (and (not (at-van ?v ?from)) (at-van ?v ?to)))
  (:action load :parameters (?x - parcel ?v - van ?p - place)
    :precondition (and (at ?x ?p) (at-van ?v ?p))
    :effect (and (not (at ?x ?p)) (in ?x ?v)))
  (:action unload :parameters (?x - parcel ?v - van ?p - place)
    :precondition (and (in ?x ?v) (at-van ?v ?p))
    :effect (and (not (in ?x ?v)) (at ?x ?p))))
"""
PROBLEM = """(define (problem two-parcels) (:domain courier)
  (:objects home shop - place p1 p2 - parcel v1 - van)
  (:init (at-van v1 depot) (at p1 home) (at p2 shop))
  (:goal (and (at p1 depot) (at p2 depot))))
"""
PLAN = """(drive v1 depot home)
(load p1 v1 home)
(drive v1 home shop)
(load p2 v1 shop)
(drive v1 shop depot)
(unload p1 v1 depot)
(unload p2 v1 depot)
"""

# (name, domain, problem, category, code, the symbol the message must name)
BROKEN = [
    ("undeclared-predicate-in-init", DOMAIN, PROBLEM.replace("(at p2 shop)", "(at p2 shop) (sunny home)"),
     ErrorCategory.PARSE_ERROR_PROBLEM, "semantic.unknown_predicate", "sunny"),
    ("undeclared-predicate-in-goal", DOMAIN, PROBLEM.replace("(at p2 depot))", "(at p2 depot) (sunny home))"),
     ErrorCategory.PARSE_ERROR_PROBLEM, "semantic.unknown_predicate", "sunny"),
    ("wrong-arity-in-init", DOMAIN, PROBLEM.replace("(at p1 home)", "(at p1)"),
     ErrorCategory.PARSE_ERROR_PROBLEM, "semantic.arity_mismatch", "at"),
    ("wrong-arity-in-action", DOMAIN.replace(":precondition (at-van ?v ?from)", ":precondition (at-van ?v)"),
     PROBLEM, ErrorCategory.PARSE_ERROR_DOMAIN, "semantic.arity_mismatch", "at-van"),
    ("undeclared-type", DOMAIN, PROBLEM.replace("v1 - van", "v1 - truck"),
     ErrorCategory.PARSE_ERROR_PROBLEM, "semantic.unknown_type", "truck"),
    ("undeclared-object", DOMAIN, PROBLEM.replace("(at p2 shop)", "(at p3 shop)"),
     ErrorCategory.PARSE_ERROR_PROBLEM, "semantic.unknown_object", "p3"),
    ("wrong-type", DOMAIN, PROBLEM.replace("(at p2 shop)", "(at v1 shop)"),
     ErrorCategory.PARSE_ERROR_PROBLEM, "semantic.type_mismatch", "v1"),
    ("mismatched-domain-name", DOMAIN, PROBLEM.replace("(:domain courier)", "(:domain logistics)"),
     ErrorCategory.PARSE_ERROR_PROBLEM, "semantic.domain_name_mismatch", "logistics"),
    ("undeclared-predicate-in-effect",
     DOMAIN.replace("(in ?x ?v)))\n  (:action unload", "(held ?x)))\n  (:action unload"), PROBLEM,
     ErrorCategory.PARSE_ERROR_DOMAIN, "semantic.unknown_predicate", "held"),
    ("unbound-variable", DOMAIN.replace(":precondition (at-van ?v ?from)", ":precondition (at-van ?w ?from)"),
     PROBLEM, ErrorCategory.PARSE_ERROR_DOMAIN, "semantic.unbound_variable", "?w"),
    ("derived-without-requirement", DOMAIN.replace("(:action drive", "(:derived (at ?x - parcel ?p - place) "
                                                   "(in ?x v1))\n  (:action drive"),
     PROBLEM, ErrorCategory.PARSE_ERROR_DOMAIN, None, None),
]


def test_the_well_formed_task_is_solved_and_its_plan_valid():
    assert pddl_check.check(DOMAIN, PROBLEM) is None
    assert solvers.plan(DOMAIN, PROBLEM).ok
    assert solvers.plan(DOMAIN, PROBLEM, planner="temporal").ok
    assert solvers.validate(DOMAIN, PROBLEM, PLAN).valid


@pytest.mark.parametrize(("name", "domain", "problem", "category", "code", "symbol"), BROKEN,
                         ids=[case[0] for case in BROKEN])
def test_ill_formed_pddl_is_a_parse_error_everywhere(name, domain, problem, category, code, symbol):
    error = pddl_check.check(domain, problem)
    assert error is not None and error.category is category, error
    if code is not None:
        assert error.code == code and f"'{symbol}'" in error.message, error
    for planner in ("fd", "temporal"):
        result = solvers.plan(domain, problem, planner=planner)
        assert result.category is category, (planner, result)
        assert result.message.startswith(error.location) and result.plan is None
    verdict = solvers.validate(domain, problem, PLAN)
    assert not verdict.valid and verdict.category is category and verdict.location == error.location
    file, line, col = verdict.location.split(":")
    assert file in ("domain.pddl", "problem.pddl") and int(line) >= 1 and int(col) >= 1


def test_location_points_at_the_symbol():
    problem = PROBLEM.replace("(at p2 shop)", "(at p2 shop)\n        (sunny home)")
    error = pddl_check.check(DOMAIN, problem)
    assert error is not None and error.location == "problem.pddl:4:10"


def test_every_bundled_task_passes_the_check():
    """The fixtures (IPC, IPC temporal, PlanBench) are well-formed: the check rejects none."""
    checked = 0
    for domain in sorted(FIXTURES.rglob("domain*.pddl")):
        for problem in sorted(domain.parent.rglob("*.pddl")):
            if "domain" in problem.name:
                continue
            error = pddl_check.check(domain.read_text(encoding="latin-1"), problem.read_text(encoding="latin-1"))
            assert error is None, (problem, str(error))
            checked += 1
    assert checked >= 60


def test_the_check_covers_features_of_the_ipc_fixtures():
    """Derived predicates, equality, conditional effects, quantifiers, action costs and typed
    constants are understood (a broken use in such a domain is still caught)."""
    domain = (IPC / "psr-middle" / "domain.pddl").read_text()
    problem = (IPC / "psr-middle" / "p01-s17-n2-l2-f30.pddl").read_text()
    assert pddl_check.check(domain, problem) is None
    broken = domain.replace("(con ?x side2 ?y ?sy)", "(con ?x side2 ?y)", 1)
    error = pddl_check.check(broken, problem)
    assert error is not None and error.code == "semantic.arity_mismatch"
    elevators = (IPC / "elevators" / "domain.pddl").read_text()
    problem = (IPC / "elevators" / "p01.pddl").read_text()
    assert pddl_check.check(elevators, problem) is None
    error = pddl_check.check(elevators, problem.replace("(= (total-cost) 0)", "(= (total-kost) 0)"))
    assert error is not None and error.code == "semantic.unknown_function", error


@pytest.mark.parametrize("name", ["depots", "logistics", "mystery_blocksworld", "obfuscated_deceptive_logistics"])
def test_planbench_tasks_keep_their_verdicts(name):
    """Well-formed PlanBench PDDL (typed, untyped, obfuscated names) still plans, its plan is still
    valid and a corrupted plan still invalid at the same step: the check changes no verdict."""
    folder = FIXTURES / "planbench-check" / name
    domain, problem = (folder / "domain.pddl").read_text(), (folder / "instance-2.pddl").read_text()
    assert pddl_check.check(domain, problem) is None
    result = solvers.plan(domain, problem, limits=solvers.Limits(timeout_s=30))
    assert result.ok, result.message
    assert solvers.validate(domain, problem, result.plan_text).valid
    doubled = [result.plan[0], *result.plan]
    bad = solvers.validate(domain, problem, solvers.plan_to_text(doubled))
    assert bad.category is ErrorCategory.PLAN_INVALID and bad.failing_step == 2, bad


@pytest.mark.parametrize(("name", "domain", "problem", "category", "code", "symbol"), BROKEN[:4],
                         ids=[case[0] for case in BROKEN[:4]])
def test_the_check_runs_in_the_sandbox_with_the_same_verdict(monkeypatch, name, domain, problem, category, code,
                                                             symbol):
    expected = pddl_check._check_pair(domain, problem, None)  # judged here, not remembered
    pddl_check._PAIRS.clear()

    def not_here(*args: object) -> None:
        raise AssertionError("the pair was checked in the client, not in the sandboxed worker")

    monkeypatch.setattr(pddl_check, "_check_pair", not_here)
    verdict = solvers.validate(domain, problem, PLAN)
    assert verdict.category is expected.category and verdict.location == expected.location
    assert verdict.diagnostics == [expected.code] and verdict.cpu_s > 0
    assert pddl_check.recall(domain, problem) == (True, expected)
    assert solvers.plan(domain, problem).category is expected.category  # from the remembered verdict


def test_a_pair_is_checked_once_per_process_and_each_plan_s_steps_on_every_validation(monkeypatch):
    from solvers.pool import WorkerPool

    asked: list[object] = []
    request = WorkerPool.request

    def spy(self, *args, **kwargs):  # noqa: ANN001,ANN202
        asked.append(kwargs.get("check"))
        return request(self, *args, **kwargs)

    monkeypatch.setattr(WorkerPool, "request", spy)
    problem = PROBLEM.replace("two-parcels", "checked-once")
    assert pddl_check.recall(DOMAIN, problem) == (False, None)
    assert solvers.plan(DOMAIN, problem).ok
    assert solvers.validate(DOMAIN, problem, PLAN).valid
    assert solvers.plan(DOMAIN, problem).ok
    # The plan call asks for the pair's check once; a validation asks for its plan's steps (the
    # worker recalls the pair's verdict), and a second plan call asks for nothing.
    assert asked == [("domain.pddl", "problem.pddl"), ("domain.pddl", "problem.pddl", "plan.txt"), None], asked
    assert pddl_check.recall(DOMAIN, problem) == (True, None)


def test_an_answer_made_without_the_sandbox_still_puts_the_check_first():
    """An over-long plan line is refused before anything runs; ill-formed PDDL still comes first."""
    pddl_check._PAIRS.clear()
    problem = PROBLEM.replace("(at p2 shop)", "(at p2 shop) (sunny home)")
    verdict = solvers.validate(DOMAIN, problem, "(" + "x" * 200_000 + ")\n")
    assert verdict.category is ErrorCategory.PARSE_ERROR_PROBLEM and "sunny" in verdict.message
    verdict = solvers.validate(DOMAIN, PROBLEM, "(" + "x" * 200_000 + ")\n")
    assert verdict.category is ErrorCategory.PARSE_ERROR_PLAN

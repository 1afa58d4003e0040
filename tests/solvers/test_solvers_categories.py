"""Each error category comes out of real planner and validator runs."""

from __future__ import annotations

import time

import pytest
from solver_helpers import IPC

import solvers
from solvers import Limits
from solvers.plans import parse_plan_text, plan_cost
from solvers.results import ErrorCategory


def test_parse_errors_name_the_file(bw_domain, bw_problem):
    assert solvers.plan(bw_domain[: len(bw_domain) // 2], bw_problem).category is ErrorCategory.PARSE_ERROR_DOMAIN
    assert solvers.plan(bw_domain, bw_problem[: len(bw_problem) // 2]).category is ErrorCategory.PARSE_ERROR_PROBLEM
    assert solvers.plan("", bw_problem).category is ErrorCategory.PARSE_ERROR_DOMAIN
    assert solvers.plan(bw_domain, "  ; nothing\n").category is ErrorCategory.PARSE_ERROR_PROBLEM
    undefined = bw_problem.replace("(:goal (AND", "(:goal (AND (ON Z A)")
    result = solvers.plan(bw_domain, undefined)
    assert result.category is ErrorCategory.PARSE_ERROR_PROBLEM
    assert "z" in result.message.lower()


def test_temporal_planner_parse_errors_name_the_file(bw_domain, bw_problem):
    result = solvers.plan(bw_domain[:300], bw_problem, planner="temporal")
    assert result.category is ErrorCategory.PARSE_ERROR_DOMAIN
    assert result.message.startswith("domain.pddl:")
    result = solvers.plan(bw_domain, bw_problem[:150], planner="temporal")
    assert result.category is ErrorCategory.PARSE_ERROR_PROBLEM


def test_validator_parse_errors_carry_file_line_col(bw_domain, bw_problem):
    plan = solvers.plan(bw_domain, bw_problem).plan_text
    verdict = solvers.validate(bw_domain[:300], bw_problem, plan)
    assert verdict.category is ErrorCategory.PARSE_ERROR_DOMAIN
    file, line, col = verdict.location.split(":")
    assert file == "domain.pddl" and int(line) > 1 and int(col) >= 1
    verdict = solvers.validate(bw_domain, bw_problem[:150], plan)
    assert verdict.category is ErrorCategory.PARSE_ERROR_PROBLEM and verdict.location.startswith("problem.pddl:")
    verdict = solvers.validate(bw_domain, bw_problem, "(pick-up a\n")
    assert verdict.category is ErrorCategory.PARSE_ERROR_PLAN
    assert verdict.location == "plan.txt:1:11"


def test_unreached_goal_is_named(bw_domain, bw_problem):
    plan = solvers.plan(bw_domain, bw_problem).plan
    verdict = solvers.validate(bw_domain, bw_problem, solvers.plan_to_text(plan[:-1]))
    assert verdict.category is ErrorCategory.PLAN_INVALID
    assert verdict.failing_step is None and verdict.unreached_goal and verdict.unreached_goal.startswith("(")


def test_unknown_action_in_plan_fails_at_its_step(bw_domain, bw_problem):
    plan = solvers.plan(bw_domain, bw_problem).plan_text.splitlines()
    plan.insert(2, "(teleport a b)")
    verdict = solvers.validate(bw_domain, bw_problem, "\n".join(plan))
    assert verdict.category is ErrorCategory.PLAN_INVALID and verdict.failing_step == 3


def test_negative_precondition_is_reported_negated():
    domain = (IPC / "briefcaseworld" / "domain.pddl").read_text()
    problem = (IPC / "briefcaseworld" / "pfile2.pddl").read_text()
    plan = solvers.plan(domain, problem).plan
    doubled = [plan[0], plan[0], *plan[1:]] if plan[0].name == "put-in" else [*plan, plan[-1]]
    verdict = solvers.validate(domain, problem, solvers.plan_to_text(doubled))
    assert verdict.category is ErrorCategory.PLAN_INVALID
    assert verdict.unsatisfied and verdict.unsatisfied.startswith("(not ")


def test_unknown_requirement_is_unsupported(bw_domain, bw_problem):
    result = solvers.plan(bw_domain.replace(":strips", ":strips :quantum-effects"), bw_problem)
    assert result.category is ErrorCategory.UNSUPPORTED_REQUIREMENT
    assert ":quantum-effects" in result.message


def test_search_configuration_that_cannot_handle_axioms_is_unsupported():
    domain = (IPC / "psr-middle" / "domain.pddl").read_text()
    problem = (IPC / "psr-middle" / "p01-s17-n2-l2-f30.pddl").read_text()
    result = solvers.plan(domain, problem, search="astar(lmcut())")
    assert result.category is ErrorCategory.UNSUPPORTED_REQUIREMENT, result.message


def test_bad_search_string_is_an_input_error(bw_domain, bw_problem):
    result = solvers.plan(bw_domain, bw_problem, search="astar(no_such_heuristic())")
    assert result.category is ErrorCategory.INPUT_ERROR


@pytest.mark.parametrize("planner", ["fd", "temporal"])
def test_unsolvable_is_proved(bw_domain, bw_problem, planner):
    impossible = bw_problem.replace("(:goal (AND", "(:goal (AND (ON A A)")
    result = solvers.plan(bw_domain, impossible, planner=planner)
    assert result.category is ErrorCategory.UNSOLVABLE_PROVED, result.message


def test_two_second_limit_returns_search_timeout_within_three_seconds():
    domain = (IPC / "blocksworld" / "domain.pddl").read_text()
    problem = (IPC / "blocksworld" / "probBLOCKS-5-2.pddl").read_text()
    solvers.plan(domain, problem)  # a warm worker: the limit is about the call, not start-up
    # Blind A* on a 20-step blocksworld task: far more than 2 s here.
    hard = (IPC / "blocksworld" / "probBLOCKS-5-2.pddl").read_text()
    t0 = time.monotonic()
    result = solvers.plan(domain, _bigger_blocks(hard), search="astar(blind())", limits=Limits(timeout_s=2))
    elapsed = time.monotonic() - t0
    assert result.category is ErrorCategory.SEARCH_TIMEOUT, result.message
    assert elapsed < 3.0, elapsed


def _bigger_blocks(problem: str) -> str:
    """Reverse a tower of 12 blocks: out of reach of blind search in seconds."""
    names = [f"B{i}" for i in range(12)]
    init = " ".join(f"(ON {a} {b})" for a, b in zip(names, names[1:], strict=False))
    goal = " ".join(f"(ON {b} {a})" for a, b in zip(names, names[1:], strict=False))
    return (f"(define (problem tower12) (:domain BLOCKS) (:objects {' '.join(names)})"
            f" (:INIT (HANDEMPTY) (CLEAR B0) (ONTABLE B11) {init}) (:goal (AND {goal})))")


def test_temporal_timeout_is_a_search_timeout(bw_domain):
    t0 = time.monotonic()
    result = solvers.plan(bw_domain, _bigger_blocks(""), planner="temporal", limits=Limits(timeout_s=1))
    assert result.category in (ErrorCategory.SEARCH_TIMEOUT, ErrorCategory.OK)
    assert time.monotonic() - t0 < 2.5


def test_memory_hungry_grounding_hits_memory_limit_and_the_worker_survives(bw_domain, bw_problem):
    objects = " ".join(f"o{i}" for i in range(60))
    domain = """(define (domain boom) (:requirements :strips)
      (:predicates (p ?a ?b ?c ?d ?e) (q ?a))
      (:action go :parameters (?a ?b ?c ?d ?e)
        :precondition (and (q ?a) (q ?b) (q ?c) (q ?d) (q ?e)) :effect (p ?a ?b ?c ?d ?e)))"""
    init = " ".join(f"(q o{i})" for i in range(60))
    problem = f"(define (problem boom1) (:domain boom) (:objects {objects}) (:init {init}) (:goal (p o1 o2 o3 o4 o5)))"
    result = solvers.plan(domain, problem, limits=Limits(timeout_s=120, memory_mb=100))
    assert result.category is ErrorCategory.MEMORY_LIMIT, (result.message, result.output_tail[-500:])
    assert solvers.plan(bw_domain, bw_problem).ok


def test_memory_hungry_search_hits_memory_limit(bw_domain):
    result = solvers.plan(bw_domain, _bigger_blocks(""), search="astar(blind())",
                          limits=Limits(timeout_s=120, memory_mb=64))
    assert result.category is ErrorCategory.MEMORY_LIMIT, (result.message, result.output_tail[-500:])


def test_bad_arguments_raise(bw_domain, bw_problem):
    with pytest.raises(ValueError, match="planner"):
        solvers.plan(bw_domain, bw_problem, planner="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="alias"):
        solvers.plan(bw_domain, bw_problem, alias="no-such-alias")
    with pytest.raises(TypeError):
        solvers.plan(bw_domain.encode(), bw_problem)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        Limits(timeout_s=0)
    with pytest.raises(ValueError, match="search"):
        solvers.plan(bw_domain, bw_problem, search="--help")
    with pytest.raises(ValueError, match="sandbox"):
        solvers.plan(bw_domain, bw_problem, sandbox="docker")


def test_plan_text_parsing_and_costs():
    steps, cost = parse_plan_text("(pick-up a)\n(stack a b)\n; cost = 2 (unit cost)\n")
    assert [s.name for s in steps] == ["pick-up", "stack"] and cost == 2.0
    assert plan_cost("; cost = 67.006\n; makespan = 67.006\n0.000: (a x) [5.000]\n") == pytest.approx(67.006)
    steps, cost = parse_plan_text("0.000: (go x y) [2.5]\n1.000: (go y z) [3]\n")
    assert cost == pytest.approx(4.0) and steps[1].start == 1.0 and steps[1].duration == 3.0
    with pytest.raises(ValueError, match="line 2"):
        solvers.parse_plan("(a)\nnot a step\n")


def test_results_serialise_with_category_strings(bw_domain, bw_problem):
    data = solvers.plan(bw_domain, bw_problem).to_dict()
    assert data["category"] == "ok" and data["sandbox"] in ("bwrap", "rlimits")
    assert solvers.versions()["fast-downward"]


def test_solver_cpu_covers_the_child_and_the_sandbox_workers_share(bw_domain, bw_problem):
    """cpu_s of a call = the confined planner/validator process plus the sandbox worker's own CPU for
    the call (fork, files), reported separately by the worker as host_cpu_s."""
    from solvers.pool import get_pool

    planned = solvers.plan(bw_domain, bw_problem)
    assert planned.ok and planned.cpu_s > 0
    checked = solvers.validate(bw_domain, bw_problem, planned.plan_text)
    assert checked.valid and checked.cpu_s > 0
    files = {"domain.pddl": bw_domain, "problem.pddl": bw_problem, "plan.txt": planned.plan_text}
    from solvers import kairos_cli

    pool = get_pool()
    worker = pool._acquire()  # noqa: SLF001  (the raw answer, to see both parts)
    try:
        import base64

        payload = {"kind": "exec", "argv": kairos_cli.validate_argv(), "timeout_s": 10, "output_bytes": 65536,
                   "collect": [], "collect_bytes": 1024, "env": {"PATH": "/usr/bin:/bin"}, "confine": True,
                   "limits": {}, "files": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}
        answer = worker.call(payload, time.monotonic() + 30)
    finally:
        pool._release(worker, broken=False)  # noqa: SLF001
    assert answer["ok"] and answer["cpu_s"] > 0 and answer["host_cpu_s"] > 0


def test_every_cpu_second_of_the_sandbox_worker_is_attributed_to_some_call(bw_domain, bw_problem):
    """host_cpu_s runs from one answer to the next, so over many calls host_cpu_s + cpu_s adds up to
    the sandbox worker's whole CPU (its own and its reaped children's), give or take clock ticks."""
    import psutil

    from solvers import kairos_cli
    from solvers.pool import WorkerPool
    from solvers.sandbox import sandbox_level

    def tree_cpu_s(pid: int) -> float:
        root = psutil.Process(pid)
        total = 0.0
        for proc in [root, *root.children(recursive=True)]:
            t = proc.cpu_times()  # children_*: the reaped planner and validator runs
            total += t.user + t.system + t.children_user + t.children_system
        return total

    plan = solvers.plan(bw_domain, bw_problem).plan_text
    files = {"domain.pddl": bw_domain, "problem.pddl": bw_problem, "plan.txt": plan}
    request, limits = {"kind": "exec", "argv": kairos_cli.validate_argv()}, solvers.Limits()
    pool = WorkerPool(sandbox_level(), size=1)
    try:
        pool.request(request, files=files, limits=limits)  # start-up is not a call's CPU
        worker = next(iter(pool._all))  # noqa: SLF001
        before = tree_cpu_s(worker.proc.pid)
        reported = sum(pool.request(request, files=files, limits=limits).cpu_s for _ in range(30))
        after = tree_cpu_s(worker.proc.pid)
    finally:
        pool.close()
    assert reported > 0
    assert abs((after - before) - reported) <= 0.04 + 0.05 * reported, (after - before, reported)

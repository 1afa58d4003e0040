"""VAL and POPF are used when on PATH (the k8s images build them); neither can be installed on
this machine, so their report readers are checked on text in their output formats."""

from __future__ import annotations

from solvers import external
from solvers.results import ErrorCategory
from solvers.sandbox import RunResult

PLAN = "(pick-up b)\n(stack b a)\n(pick-up b)\n(stack c b)\n"


def _val(output: str, code: int = 0):
    return external.val_result(RunResult(code, output=output, level="bwrap"), PLAN)


def test_val_valid_plan():
    verdict = _val("Checking plan: plan.txt\nPlan executed successfully - checking goal\nPlan valid\nFinal value: 4\n")
    assert verdict.valid and verdict.category is ErrorCategory.OK


def test_val_failing_step_counts_repeated_actions_by_time():
    out = ("Checking plan: plan.txt\nPlan failed because of unsatisfied precondition in:\n(pick-up b)\n"
           "Plan failed to execute\n\nPlan Repair Advice:\n\n(pick-up b) has an unsatisfied precondition at time 3\n"
           "(Set (handempty) to true)\n")
    verdict = _val(out, 1)
    assert verdict.category is ErrorCategory.PLAN_INVALID
    assert verdict.failing_step == 3 and verdict.failing_action == "(pick-up b)"
    assert verdict.unsatisfied == "(handempty)"


def test_val_unreached_goal_and_parse_error():
    verdict = _val("Plan executed successfully - checking goal\nGoal not satisfied\n\nPlan Repair Advice:\n\n"
                   "(Set (on c b) to true)\n", 1)
    assert verdict.category is ErrorCategory.PLAN_INVALID and verdict.unreached_goal == "(on c b)"
    verdict = _val("domain.pddl: line: 15: Error: Syntax error in domain\n", 1)
    assert verdict.category is ErrorCategory.PARSE_ERROR_DOMAIN and verdict.location == "domain.pddl:15"


def test_popf_last_solution_and_unsolvable():
    out = (";;;; Solution Found\n; States evaluated: 12\n; Cost: 10.002\n0.000: (go a b)  [5.000]\n"
           "5.001: (go b c)  [5.000]\n")
    result = external.popf_result(RunResult(0, output=out, level="bwrap"))
    assert result.ok and len(result.plan) == 2 and abs(result.cost - 10.001) < 1e-6
    unsolvable = external.popf_result(RunResult(0, output=";; Problem unsolvable!\n", level="bwrap"))
    assert unsolvable.category is ErrorCategory.UNSOLVABLE_PROVED

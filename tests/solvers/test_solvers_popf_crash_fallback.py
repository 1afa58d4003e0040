""""temporal" names a temporal planner, not POPF: where the real POPF dies on an input (a generated
satellite task missing one init fact makes it segfault), Kairos answers and the crash is named, so
a rollout does not lose the episode to it. Asked for by name, POPF's crash stays a tool failure.
Skips, saying why, without the real POPF."""

from __future__ import annotations

from real_tools import use_real_tools
from solver_helpers import FIXTURES, TEMPORAL

import solvers
from solvers.results import ErrorCategory

DOMAIN = (TEMPORAL / "satellite" / "domain.pddl").read_text()
PROBLEM = (FIXTURES / "popf-crash" / "satellite-problem.pddl").read_text()
LIMITS = solvers.Limits(timeout_s=30)


def test_popf_by_name_reports_its_crash_as_a_tool_failure(monkeypatch):
    use_real_tools(monkeypatch, need_popf=True)
    result = solvers.plan(DOMAIN, PROBLEM, planner="popf", limits=LIMITS)
    assert result.planner == "popf" and result.category is ErrorCategory.SOLVER_CRASH, result.message
    assert "SIGSEGV" in result.message


def test_the_temporal_planner_falls_back_to_kairos_where_popf_crashes(monkeypatch):
    use_real_tools(monkeypatch, need_popf=True)
    crashed = solvers.plan(DOMAIN, PROBLEM, planner="popf", limits=LIMITS)
    result = solvers.plan(DOMAIN, PROBLEM, planner="temporal", limits=LIMITS)
    assert result.ok and result.planner == "kairos", (result.category, result.message)
    assert result.message.startswith("popf died (POPF died on SIGSEGV") and "kairos answered" in result.message
    assert result.cpu_s > crashed.cpu_s > 0  # both runs' time counted
    verdict = solvers.validate(DOMAIN, PROBLEM, result.plan_text)
    assert verdict.valid, (verdict.validator, verdict.message)


def test_a_solvable_task_still_gets_popfs_plan(monkeypatch):
    use_real_tools(monkeypatch, need_popf=True)
    result = solvers.plan(DOMAIN, (TEMPORAL / "satellite" / "instance-1.pddl").read_text(), planner="temporal",
                          limits=LIMITS)
    assert result.ok and result.planner == "popf" and not result.message, result.message


def test_a_generated_tasks_gold_check_records_the_planner_that_answered(monkeypatch):
    from rollout.tasks.generators.verify import solve_and_check

    use_real_tools(monkeypatch, need_popf=True)
    crashed_over = solve_and_check(DOMAIN, PROBLEM, LIMITS, planner="temporal")
    assert crashed_over.status == "gold" and crashed_over.planner == "kairos"
    plain = solve_and_check(DOMAIN, (TEMPORAL / "satellite" / "instance-1.pddl").read_text(), LIMITS,
                            planner="temporal")
    assert plain.status == "gold" and plain.planner == "popf"

"""POPF end to end with VAL as the validator of record: the bundled temporal tasks through
`halo solve`, a `halo rollout --tasks temporal:bundled` job, and the temporal generators' gold
checks. Skips, saying why, without the real tools (../shared/planners/bin)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from real_tools import use_real_tools
from typer.testing import CliRunner

import solvers
from cluster.cli import app
from rollout.tasks import load_tasks

HALO = str(Path(sys.executable).with_name("halo"))
TEMPORAL = Path(__file__).resolve().parents[2] / "rollout" / "tasks" / "data" / "temporal"


def test_halo_solve_plans_every_bundled_temporal_task_with_popf_and_val_accepts(monkeypatch, tmp_path):
    use_real_tools(monkeypatch, need_popf=True)
    tasks = sorted((d, p) for d in TEMPORAL.iterdir() for p in d.glob("instance-*.pddl"))
    assert len(tasks) == 6
    for folder, problem in tasks:
        result = CliRunner().invoke(app, ["solve", str(folder / "domain.pddl"), str(problem), "--planner", "popf",
                                          "--validate", "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["plan"]["planner"] == "popf" and report["plan"]["category"] == "ok", problem
        assert report["validation"]["validator"] == "val" and report["validation"]["valid"], problem


def test_halo_rollout_on_temporal_tasks_plans_with_popf_and_validates_with_val(monkeypatch, tmp_path):
    found = use_real_tools(monkeypatch, need_popf=True)
    store = tmp_path / "store"
    env = {"PATH": f"{found}:/usr/bin:/bin", "HALO_CPU_CLAIMS_DIR": str(tmp_path / "claims"), "HOME": str(tmp_path),
           "HALO_ROLLOUT_VALIDATOR": "val"}  # the loop judges with Kairos unless told
    result = subprocess.run([HALO, "rollout", "--store", str(store), "--tasks", "temporal:bundled", "--episodes", "6",
                             "--replicas", "1", "--no-progress"], capture_output=True, text=True, timeout=400, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    from rollout.store.trajectory_store import TrajectoryStore

    episodes = TrajectoryStore(store).read_episodes()
    assert len(episodes) == 6
    categories = {step.error_category for e in episodes for step in e.steps}
    assert not any(solvers.ErrorCategory(c).is_tool_failure for c in categories if c), categories
    accepted = [e for e in episodes if e.success_validator]
    assert accepted, categories
    for episode in episodes:
        versions = json.loads(episode.solver_versions)
        assert "popf" in versions and "val" in versions
    for episode in accepted:  # the accepted plans pass VAL again, outside the loop, on the episode's PDDL
        last = episode.steps[-1]
        assert solvers.validate(last.domain_after, last.problem_after, last.plan_after, validator="val").valid


def test_temporal_generators_gold_checks_use_popf_and_val(monkeypatch, tmp_path):
    use_real_tools(monkeypatch, need_popf=True)
    out = tmp_path / "set"
    result = CliRunner().invoke(app, ["tasks", "generate", "satellite,rovers", "--difficulty", "easy", "--count", "2",
                                      "--seed", "3", "--out", str(out), "--ray", "off"])
    assert result.exit_code == 0, result.output
    tasks = load_tasks(f"gen:{out}")
    assert len(tasks) == 4 and all(t.target_planner == "temporal" for t in tasks)
    from rollout.tasks.generators.genset import read_index

    rows = read_index(out)
    assert {r["planner"] for r in rows} == {"popf"} and {r["validator"] for r in rows} == {"val"}, rows
    for task in tasks:
        assert solvers.validate(task.gold_domain, task.gold_problem, task.gold_plan, validator="val").valid

"""The classical family as the papers define it (`halo tasks generate classical-paper`)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import solvers
from cluster.cli import app
from rollout.tasks.generators.genset import read_index
from rollout.tasks.generators.paper_classical import BLOCKSWORLD_LENGTHS, HANOI_DISCS
from rollout.tasks.loaders import load_tasks

runner = CliRunner()


def test_levels_by_optimal_length_and_discs(tmp_path: Path) -> None:
    out = tmp_path / "classical"
    result = runner.invoke(app, ["tasks", "generate", "classical-paper", "--count", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = read_index(out)
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["domain"], r["level"]), []).append(r)
    for level, (lo, hi) in BLOCKSWORLD_LENGTHS.items():
        bw = groups[("blocksworld", level)]
        assert len(bw) == 2 and all(lo <= r["plan_length"] <= hi and r["planner"] == "fd:seq-opt-lmcut" for r in bw)
    for level, discs in HANOI_DISCS.items():
        assert [json.loads(r["sizes"])["discs"] for r in groups[("hanoi", level)]] == [discs, discs]
    assert {d for d, lv in groups if lv == "borealis"} == {"childsnack", "floortile"}
    # the gold plan of a medium task is optimal: an independent optimal search finds no shorter one
    task = next(t for t in load_tasks(f"gen:{out}:domain=blocksworld:level=medium"))
    again = solvers.plan(task.gold_domain, task.gold_problem, search="astar(lmcut())")
    assert again.plan is not None and len(again.plan) == len(task.gold_plan.split("\n")) - 1 >= 6


def test_classical_paper_fixes_its_levels(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tasks", "generate", "classical-paper", "--difficulty", "easy", "--out",
                                 str(tmp_path / "x")])
    assert result.exit_code == 2 and "fixes its own levels" in result.output

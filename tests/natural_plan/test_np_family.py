"""Natural Plan as a family: generated tasks in the benchmark's format with gold PDDL, checked
by the benchmark's rules, loadable by every command, run in the simulated world."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

import solvers
from cluster.cli import app
from rollout.loop.oracle import check_plan
from rollout.tasks.loaders import load_tasks
from rollout.tasks.natural_plan import calendar, meeting, trip
from rollout.tasks.natural_plan.data_file import score_example
from rollout.tasks.natural_plan.instance import LEVELS
from rollout.tasks.natural_plan.taskset import GENERATORS, corrupt_answer

runner = CliRunner()
KINDS = tuple(GENERATORS)


@pytest.fixture(scope="module")
def taskset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("np") / "set"
    result = runner.invoke(app, ["tasks", "generate", "natural_plan", "--difficulty", "all", "--count", "4",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "36 Natural Plan tasks" in result.output
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", LEVELS)
def test_gold_scores_one_and_corruption_zero(kind: str, level: str) -> None:
    rng = random.Random(f"test|{kind}|{level}")
    made = [i for i in (GENERATORS[kind](rng, level, f"p{n}") for n in range(30)) if i is not None]
    assert len(made) >= 25
    for inst in made:
        assert score_example(kind, inst.example, inst.example["golden_plan"]) is True
        assert score_example(kind, inst.example, corrupt_answer(inst)) is False


def test_difficulty_axes_follow_the_benchmark() -> None:
    def sizes(kind: str, level: str, key: str) -> set[int]:
        rng = random.Random(0)
        return {i.example[key] for i in (GENERATORS[kind](rng, level, "p") for _ in range(40)) if i}

    assert max(sizes("trip_planning", "easy", "num_cities")) < min(sizes("trip_planning", "hard", "num_cities"))
    assert max(sizes("meeting_planning", "easy", "num_people")) < min(sizes("meeting_planning", "hard", "num_people"))
    hard_cal = sizes("calendar_scheduling", "hard", "num_people") | sizes("calendar_scheduling", "hard", "num_days")
    assert max(hard_cal) >= 4 and max(sizes("calendar_scheduling", "easy", "num_days")) == 1


def test_statements_read_like_the_benchmark() -> None:
    rng = random.Random(3)
    t = trip.generate(rng, "medium", "p")
    assert t is not None and "European cities for" in t.example["prompt_0shot"]
    assert "direct flights" in t.example["prompt_0shot"]
    m = meeting.generate(rng, "medium", "p")
    assert m is not None and "minimum of" in m.example["prompt_0shot"]
    assert all(s.endswith(".") for s in m.example["golden_plan"])  # the benchmark's list of sentences
    c = calendar.generate(rng, "hard", "p")
    assert c is not None and c.example["golden_plan"].startswith("Here is the proposed time: ")


def test_the_set_scores_by_the_benchmarks_rules(taskset: Path) -> None:
    for kind in KINDS:
        path = taskset / "natural_plan" / f"{kind}.json"
        gold = json.loads(runner.invoke(app, ["tasks", "score", str(path), "--field", "golden_plan",
                                              "--json"]).output)
        bad = json.loads(runner.invoke(app, ["tasks", "score", str(path), "--field", "pred_corrupted",
                                             "--json"]).output)
        assert (gold["task"], gold["n"], gold["accuracy"]) == (kind, 12, 1.0)
        assert bad["accuracy"] == 0.0


def test_every_loader_gives_checker_tasks_with_gold_pddl(taskset: Path) -> None:
    by_gen = load_tasks(f"gen:{taskset}")
    assert len(by_gen) == 36 and {t.family for t in by_gen} == {"natural_plan"}
    assert len(load_tasks(f"natural_plan:{taskset}:level=hard")) == 12
    from_file = load_tasks(f"natural_plan:{taskset / 'natural_plan' / 'trip_planning.json'}")
    assert len(from_file) == 12 and all(t.gold_domain and t.gold_answer for t in from_file)
    for task in by_gen:
        spec = json.loads(task.spec_json)
        assert "golden_plan" not in spec and "cities" not in spec  # the answer is not in what the loop sees


def test_oracle_scores_a_planner_plan_and_rejects_a_broken_one(taskset: Path) -> None:
    for kind in KINDS:
        task = next(t for t in load_tasks(f"gen:{taskset}:domain={kind}:level=medium"))
        found = solvers.plan(task.gold_domain, task.gold_problem, limits=solvers.Limits(timeout_s=60))
        assert found.plan is not None, found
        assert check_plan(task, solvers.plan_to_text(found.plan)).correct is True, kind
        assert check_plan(task, task.gold_plan.upper()).correct is True  # names are matched case-insensitively
        wrong = "\n".join(task.gold_plan.splitlines()[:-1]) if kind != "calendar_scheduling" else \
            task.gold_plan.replace("(propose ", "(propose x").split("\n")[0]
        assert check_plan(task, wrong).correct is False, kind


def test_report_runs_them_in_the_simulated_world(taskset: Path) -> None:
    report = runner.invoke(app, ["report", "--tasks", f"gen:{taskset}:9:level=easy", "--policy", "rules+scripted",
                                 "--by", "domain", "--markdown"])
    assert report.exit_code == 0, report.output
    rows = {ln.split("|")[1].strip(): ln for ln in report.output.splitlines() if ln.startswith("| ")}
    assert set(KINDS) <= set(rows) and "SIMULATED" in report.output
    for kind in KINDS:
        cells = [c.strip() for c in rows[kind].split("|")]
        assert any(c.endswith("%") for c in cells)  # an oracle success figure, not "-"


def test_benchmark_files_without_pddl_say_why_the_world_cannot_run(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"calendar_scheduling_example_0": {
        "num_days": 1, "num_people": 2, "duration": 1, "prompt_0shot": "x",
        "golden_plan": "Here is the proposed time: Monday, 9:00 - 9:30 "}}))
    task = load_tasks(f"natural_plan:{path}")[0]
    assert check_plan(task, "(propose mon-0900)").correct is None
    result = runner.invoke(app, ["report", "--tasks", f"natural_plan:{path}", "--policy", "rules+scripted"])
    assert result.exit_code != 0 and "gold PDDL" in result.output and "Traceback" not in result.output


def test_bad_natural_plan_generate_arguments(tmp_path: Path) -> None:
    for args, message in ((["natural_plan:cooking"], "unknown Natural Plan task type"),
                          (["natural_plan", "--difficulty", "extreme"], "Natural Plan levels are"),
                          (["natural_plan", "--count", "0"], "--count must be at least 1")):
        result = runner.invoke(app, ["tasks", "generate", *args, "--out", str(tmp_path / "x")])
        assert result.exit_code == 2 and message in result.output, result.output


def test_rollout_refuses_benchmark_files_in_the_simulated_world(tmp_path: Path) -> None:
    path = tmp_path / "trip.json"
    path.write_text(json.dumps({"trip_planning_example_0": {
        "cities": "Oslo**Rome", "durations": "3**2", "num_cities": 2, "prompt_0shot": "x", "golden_plan": "y"}}))
    result = runner.invoke(app, ["rollout", "--tasks", f"natural_plan:{path}", "--store", str(tmp_path / "store"),
                                 "--episodes", "1"])
    assert result.exit_code == 2 and "carry no PDDL encoding" in result.output, result.output

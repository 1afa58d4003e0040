"""Task loaders: bundled PlanBench/IPC/temporal tasks, folders, Natural Plan JSON, bad specs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rollout.tasks import TaskSpecError, find_task, load_tasks
from rollout.tasks.bundle import split_query
from rollout.tasks.loaders import DATA

SAMPLE = Path(__file__).with_name("data") / "natural_plan_sample.json"


def test_bundled_planbench_counts_and_stable_ids() -> None:
    bw = load_tasks("planbench:blocksworld")
    assert len(bw) >= 150
    assert bw[0].task_id == "planbench/blocksworld/instance-2"
    assert len({t.task_id for t in load_tasks("bundled")}) == len(load_tasks("bundled"))
    for domain in ("mystery_blocksworld", "depots", "logistics", "obfuscated_deceptive_logistics"):
        assert len(load_tasks(f"planbench:{domain}")) >= 20
    assert [t.task_id for t in load_tasks("planbench:blocksworld:5")] == [t.task_id for t in bw[:5]]
    assert len(load_tasks("planbench:all:3")) == 15


def test_planbench_task_holds_query_gold_and_plan() -> None:
    task = find_task("planbench/blocksworld/instance-2", "planbench:blocksworld:3")
    assert task.family == "planbench" and task.scoring == "gold_pddl" and task.target_planner == "fd"
    # the one-shot example is cut away: only this task's statement follows the introduction
    assert task.description.count("[STATEMENT]") == 1
    assert "orange block is on top of the red block" in task.description
    assert "[PLAN]" not in task.description
    assert "(:action pick-up" in task.gold_domain
    assert "(on c a)" in task.gold_problem
    # ground-truth plans use the instance's object names (PlanBench writes colours)
    assert task.gold_plan.splitlines()[0] == "(unstack d c)"


def test_split_query_keeps_intro_and_last_statement() -> None:
    q = ("Intro text\n\n[STATEMENT]\nexample\n[PLAN]\nx\n[PLAN END]\n\n[STATEMENT]\nmine\n"
         "My plan is as follows:\n\n[PLAN]")
    assert split_query(q) == ("Intro text", "mine")


def test_bundle_is_small() -> None:
    size = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert size < 3_000_000
    assert (DATA / "PROVENANCE.md").is_file()


def test_ipc_and_temporal_bundled_with_generated_descriptions() -> None:
    classical = load_tasks("ipc:bundled")
    temporal = load_tasks("temporal:bundled")
    assert len(classical) >= 5 and len(temporal) >= 4
    assert all(t.target_planner == "fd" and t.family == "classical" for t in classical)
    assert all(t.target_planner == "temporal" and t.family == "temporal" for t in temporal)
    depot = next(t for t in classical if t.domain_name == "depots")
    assert "Action lift(" in depot.description and "Goal:" in depot.description
    rover = temporal[0]
    assert "takes (= ?duration" in rover.description


def test_ipc_folder_loader(tmp_path: Path) -> None:
    src = DATA / "ipc" / "hanoi"
    shutil.copytree(src, tmp_path / "hanoi")
    tasks = load_tasks(f"ipc:{tmp_path / 'hanoi'}")
    assert [t.task_id.split("/")[0] for t in tasks] == ["classical"] * len(tasks)
    assert tasks[0].task_id.startswith("classical/hanoi/")
    assert load_tasks(f"temporal:{DATA / 'temporal' / 'rovers'}")[0].target_planner == "temporal"


def test_ipc_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskSpecError, match="no domain.pddl"):
        load_tasks(f"ipc:{tmp_path}")
    (tmp_path / "domain.pddl").write_text("(define (domain d))")
    with pytest.raises(TaskSpecError, match="no problem files"):
        load_tasks(f"ipc:{tmp_path}")
    (tmp_path / "p1.pddl").write_text("(define (problem p) (:init (a)")
    with pytest.raises(TaskSpecError, match="p1.pddl: cannot read PDDL"):
        load_tasks(f"ipc:{tmp_path}")


def test_natural_plan_loader() -> None:
    tasks = load_tasks(f"natural_plan:{SAMPLE}")
    kinds = {t.domain_name for t in tasks}
    assert kinds == {"calendar_scheduling", "trip_planning", "meeting_planning"}
    cal = next(t for t in tasks if t.domain_name == "calendar_scheduling")
    assert cal.task_id == "natural_plan/calendar_scheduling/calendar_scheduling_example_0"
    assert cal.scoring == "checker" and cal.gold_plan is None and cal.gold_domain is None  # no PDDL in the file
    assert json.loads(cal.gold_answer)["golden_plan"].startswith("Here is the proposed time")
    assert cal.description.startswith("You are an expert at scheduling")
    spec = json.loads(cal.spec_json)
    assert spec["num_people"] == 2 and "prompt_5shot" not in spec


def test_natural_plan_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TaskSpecError, match="not JSON"):
        load_tasks(f"natural_plan:{bad}")
    bad.write_text(json.dumps({"calendar_scheduling_example_1": {"prompt_0shot": "x"}}))
    with pytest.raises(TaskSpecError, match="lacks golden_plan"):
        load_tasks(f"natural_plan:{bad}")
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(TaskSpecError, match="JSON object"):
        load_tasks(f"natural_plan:{bad}")
    with pytest.raises(TaskSpecError, match="not found"):
        load_tasks(f"natural_plan:{tmp_path / 'missing.json'}")


@pytest.mark.parametrize("spec, message", [
    ("planbench:nosuch", "unknown PlanBench domain"),
    ("planbench:blocksworld:zero", "positive integer"),
    ("planbench:blocksworld:0", "positive integer"),
    ("wat:1", "unknown task source 'wat'"),
    ("natural_plan", "needs a file"),
])
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(TaskSpecError, match=message):
        load_tasks(spec)


def test_find_task_unknown() -> None:
    with pytest.raises(TaskSpecError, match="no task"):
        find_task("planbench/blocksworld/instance-99999", "planbench:blocksworld:2")

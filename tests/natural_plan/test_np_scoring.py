"""`halo tasks score` and the scoring rules on hand-written files in the benchmark's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from np_examples import CALENDAR_CASES, MEETING_CASES, MEETING_GOLD, MEETING_SPEC, TRIP_CASES, calendar, meeting, trip
from typer.testing import CliRunner

from cluster.cli import app
from rollout.tasks.natural_plan.scoring import count_valid_meetings, parse_proposed_time, parse_trip_answer

runner = CliRunner()


def _write(tmp_path: Path, name: str, examples: list[tuple[str, dict]]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(dict(examples)))
    return path


def _score_json(path: Path, *extra: str) -> dict:
    result = runner.invoke(app, ["tasks", "score", str(path), "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize(("answer", "right"), TRIP_CASES)
def test_trip_rules_one_by_one(tmp_path: Path, answer: str, right: bool) -> None:
    out = _score_json(_write(tmp_path, "trip.json", [trip(0, answer)]))
    assert out["task"] == "trip_planning" and out["n"] == 1 and out["correct"] == int(right)


@pytest.mark.parametrize(("answer", "right"), MEETING_CASES)
def test_meeting_rules_one_by_one(tmp_path: Path, answer: str, right: bool) -> None:
    out = _score_json(_write(tmp_path, "meeting.json", [meeting(0, answer)]))
    assert out["task"] == "meeting_planning" and out["correct"] == int(right)


@pytest.mark.parametrize(("answer", "right"), CALENDAR_CASES)
def test_calendar_rules_one_by_one(tmp_path: Path, answer: str, right: bool) -> None:
    out = _score_json(_write(tmp_path, "cal.json", [calendar(0, answer)]))
    assert out["task"] == "calendar_scheduling" and out["correct"] == int(right)


def test_whole_file_accuracy_and_buckets(tmp_path: Path) -> None:
    examples = [trip(i, answer, num_cities=3 if i % 2 else 4) for i, (answer, _) in enumerate(TRIP_CASES)]
    out = _score_json(_write(tmp_path, "trip.json", examples))
    rights = [r for _, r in TRIP_CASES]
    assert (out["n"], out["correct"]) == (len(rights), sum(rights))
    assert out["accuracy"] == pytest.approx(sum(rights) / len(rights))
    odd = [r for i, r in enumerate(rights) if i % 2]
    assert out["by_bucket"]["num_cities=3"] == {"n": len(odd), "correct": sum(odd), "accuracy": sum(odd) / len(odd)}
    cal = [calendar(i, a, people=2 + i % 3, days=1) for i, (a, _) in enumerate(CALENDAR_CASES)]
    out = _score_json(_write(tmp_path, "cal.json", cal))
    assert list(out["by_bucket"]) == ["num_people=2,num_days=1", "num_people=3,num_days=1",
                                      "num_people=4,num_days=1"]


def test_another_field_and_the_text_report(tmp_path: Path) -> None:
    path = _write(tmp_path, "meet.json", [meeting(i, a) for i, (a, _) in enumerate(MEETING_CASES)])
    assert _score_json(path, "--field", "golden_plan")["accuracy"] == 1.0
    result = runner.invoke(app, ["tasks", "score", str(path)])
    rights = sum(r for _, r in MEETING_CASES)
    assert result.exit_code == 0 and f"meeting_planning: {rights}/{len(MEETING_CASES)} correct" in result.output
    assert "num_people=2:" in result.output


def test_parsers_directly() -> None:
    assert parse_trip_answer(TRIP_CASES[0][0]) == [("Lisbon", 3), ("Porto", 2), ("Madrid", 4)]
    assert count_valid_meetings(MEETING_SPEC, MEETING_GOLD) == 2
    assert parse_proposed_time("Monday, 9:30 - 10:00") == ("Monday", 9.5, 10.0)
    assert parse_proposed_time("nothing") == parse_proposed_time("") == ("", -1.0, -1.0)


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a non-empty JSON object"),
    ('{"x": {"golden_plan": "a"}}', "cannot tell its task type"),
    ('{"trip_planning_example_0": {"cities": "A**B", "durations": "1**2", "num_cities": 2, "golden_plan": "x"}}',
     "lacks pred_5shot_pro"),
    ('{"calendar_scheduling_example_0": {"num_days": "one", "num_people": 2, "golden_plan": "x", '
     '"pred_5shot_pro": "y"}}', "must be an integer"),
    ('{"meeting_planning_example_0": {"constraints": [["Hill"]], "dist_matrix": {}, "num_people": 1, '
     '"golden_plan": [], "pred_5shot_pro": ""}}', "not in the benchmark's format"),
])
def test_malformed_files_one_line_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = runner.invoke(app, ["tasks", "score", str(path)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output


def test_missing_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tasks", "score", str(tmp_path / "none.json")])
    assert result.exit_code == 2 and "cannot read" in result.output

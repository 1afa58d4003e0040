"""A Natural Plan data file ({example_key: example}) scored the benchmark's way, per task type
and per difficulty bucket (trip: number of cities; meeting: number of people; calendar:
number of people and days, as the benchmark's scripts break their accuracies down)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollout.tasks.natural_plan.scoring import (
    AnswerFormatError,
    check_meeting_spec,
    score_calendar,
    score_meeting,
    score_trip,
)
from solvers.errors import InputError
from solvers.params import read_pairs

KINDS = ("trip_planning", "meeting_planning", "calendar_scheduling")
_KIND_FIELDS = {"trip_planning": ("cities", "durations", "num_cities"),
                "meeting_planning": ("constraints", "dist_matrix", "num_people"),
                "calendar_scheduling": ("num_days", "num_people")}


class DataFileError(InputError, ValueError):
    """A file that is not a Natural Plan data file; the message names the file and the example."""


def example_kind(key: str, example: Mapping[str, Any]) -> str | None:
    """The task type from the example's key (trip_planning_example_3), else from its fields."""
    for kind in KINDS:
        if key.startswith(kind):
            return kind
    for kind in KINDS:
        if all(f in example for f in _KIND_FIELDS[kind]):
            return kind
    return None


def bucket(kind: str, example: Mapping[str, Any]) -> str:
    if kind == "trip_planning":
        return f"num_cities={example['num_cities']}"
    if kind == "meeting_planning":
        return f"num_people={example['num_people']}"
    return f"num_people={example['num_people']},num_days={example['num_days']}"


def score_example(kind: str, example: Mapping[str, Any], answer: str) -> bool:
    if kind == "trip_planning":
        return score_trip(str(example["cities"]), str(example["durations"]), answer)
    if kind == "meeting_planning":
        return score_meeting(example, answer, example["golden_plan"])
    return score_calendar(answer, str(example["golden_plan"]))


@dataclass
class KindScore:
    task: str
    n: int = 0
    correct: int = 0
    by_bucket: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, bucket_name: str, right: bool) -> None:
        self.n += 1
        self.correct += right
        slot = self.by_bucket.setdefault(bucket_name, {"n": 0, "correct": 0, "accuracy": 0.0})
        slot["n"] += 1
        slot["correct"] += right
        slot["accuracy"] = slot["correct"] / slot["n"]

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    def to_json(self) -> dict[str, Any]:
        order = sorted(self.by_bucket, key=_bucket_order)
        return {"task": self.task, "n": self.n, "correct": self.correct, "accuracy": self.accuracy,
                "by_bucket": {b: self.by_bucket[b] for b in order}}


def _bucket_order(name: str) -> tuple[int, ...]:
    """A bucket's sort key: its values in order ("num_cities=3,num_days=10" -> (3, 10))."""
    return tuple(int(pair.value) for pair in read_pairs(name))


def read_data_file(path: Path) -> dict[str, dict[str, Any]]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataFileError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or not data:
        raise DataFileError(f"{path}: expected a non-empty JSON object of examples keyed by id")
    return data


def _checked(path: Path, key: str, example: Any, answer_field: str) -> tuple[str, str]:
    """(kind, answer) of one example, or DataFileError saying what is wrong with it."""
    if not isinstance(example, dict):
        raise DataFileError(f"{path}: example {key!r} is not an object")
    kind = example_kind(key, example)
    if kind is None:
        raise DataFileError(f"{path}: example {key!r}: cannot tell its task type from the key or fields")
    missing = [f for f in ("golden_plan", answer_field, *_KIND_FIELDS[kind]) if f not in example]
    if missing:
        raise DataFileError(f"{path}: example {key!r} ({kind}) lacks {', '.join(missing)}")
    answer = example[answer_field]
    if not isinstance(answer, str) and not (kind == "meeting_planning" and isinstance(answer, list)):
        raise DataFileError(f"{path}: example {key!r}: field {answer_field!r} is not text")
    bad = [f for f in _KIND_FIELDS[kind] if f.startswith("num_") and not isinstance(example[f], int)]
    if bad:
        raise DataFileError(f"{path}: example {key!r}: {', '.join(bad)} must be an integer")
    if kind == "meeting_planning":
        try:
            check_meeting_spec(example)
        except AnswerFormatError as exc:
            raise DataFileError(f"{path}: example {key!r}: {exc}") from exc
    return kind, answer


def score_data_file(path: Path, answer_field: str = "pred_5shot_pro") -> list[KindScore]:
    """One KindScore per task type found in the file, in KINDS order."""
    data = read_data_file(path)
    scores: dict[str, KindScore] = {}
    for key, example in data.items():
        kind, answer = _checked(Path(path), key, example, answer_field)
        try:
            right = score_example(kind, example, answer)
            name = bucket(kind, example)
        except (AnswerFormatError, ValueError, TypeError) as exc:
            raise DataFileError(f"{path}: example {key!r}: {exc}") from exc
        scores.setdefault(kind, KindScore(kind)).add(name, right)
    return [scores[k] for k in KINDS if k in scores]

"""From a plan to the benchmark's answer, and the benchmark's score of that answer.

`render_answer` is what agent 12 (AgentNaturalLanguage) writes for a Natural Plan task: the
final plan in the benchmark's answer format. `check_answer` is the oracle for such tasks: it
maps the loop's names back to the gold PDDL's, renders the plan, and scores the rendering
exactly as the benchmark's evaluation scores a model's answer."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rollout.tasks.natural_plan.calendar import render_calendar
from rollout.tasks.natural_plan.data_file import score_example
from rollout.tasks.natural_plan.meeting import render_meeting
from rollout.tasks.natural_plan.trip import render_trip

RENDERERS: dict[str, Callable[[str, dict], str]] = {
    "trip_planning": render_trip, "meeting_planning": render_meeting, "calendar_scheduling": render_calendar}


def gold_example(gold_answer: str) -> dict[str, Any]:
    """The scoring fields stored with a task (Task.gold_answer), 'kind' included."""
    example = json.loads(gold_answer)
    if not isinstance(example, dict) or example.get("kind") not in RENDERERS:
        raise ValueError("not a Natural Plan gold answer")
    return example


def render_answer(gold_answer: str, gold_named_plan: str) -> str:
    """A plan already in the gold PDDL's names, in the benchmark's answer format."""
    example = gold_example(gold_answer)
    return RENDERERS[example["kind"]](gold_named_plan, example)


def score_answer(gold_answer: str, answer: str) -> bool:
    example = gold_example(gold_answer)
    return score_example(example["kind"], example, answer)

"""Plan text: IPC format steps, optional start times and durations, `; cost = N` comments."""

from __future__ import annotations

import re

from solvers.errors import InputError
from solvers.results import PlanStep


class PlanParseError(InputError, ValueError):
    """A plan line that is not a plan step; `line` is its number (1-based)."""

    def __init__(self, line: int, text: str) -> None:
        super().__init__(f"line {line}: not a plan step: {text.strip()[:120]!r}")
        self.line = line

_STEP_RE = re.compile(
    r"^\s*(?:(?P<start>[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*:\s*)?"
    r"\(\s*(?P<body>[^()]*?)\s*\)\s*(?:\[\s*(?P<dur>[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*\])?"
)
_COST_RE = re.compile(r"^\s*;+\s*cost\s*=\s*(?P<cost>[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)", re.I)


def parse_plan(text: str) -> list[PlanStep]:
    """Steps of a plan in IPC format; raises PlanParseError (a ValueError) at the first line that is not one."""
    steps = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(";", 1)[0].strip()
        if not line:
            continue
        m = _STEP_RE.match(line)
        if not m or not m.group("body").strip():
            raise PlanParseError(number, raw)
        name, *args = m.group("body").lower().split()
        steps.append(PlanStep(
            name,
            tuple(args),
            float(m.group("start")) if m.group("start") else None,
            float(m.group("dur")) if m.group("dur") else None,
        ))
    return steps


def plan_cost(text: str) -> float | None:
    """The last `; cost = N` comment of a plan (Fast Downward and Kairos both write one)."""
    cost = None
    for line in text.splitlines():
        m = _COST_RE.match(line)
        if m:
            cost = float(m.group("cost"))
    return cost


def parse_plan_text(text: str) -> tuple[list[PlanStep], float | None]:
    """Steps and cost of one plan file (one plan per file: FD's sas_plan, Kairos' --output with
    --no-anytime). A temporal plan without a cost comment costs its makespan."""
    steps = parse_plan(text)
    cost = plan_cost(text)
    if cost is None and steps and steps[0].start is not None:
        cost = max((s.start or 0.0) + (s.duration or 0.0) for s in steps)
    return steps, cost

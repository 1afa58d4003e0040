"""One generated Natural Plan task: the benchmark-format example (statement, fields, golden
answer) and the gold PDDL (domain, problem, plan) that encodes the same constraints."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

LEVELS = ("easy", "medium", "hard")
# fields of an example that give the answer away: kept out of the spec the loop sees
ANSWER_FIELDS = ("golden_plan", "cities", "durations", "pred_5shot_pro", "prompt_5shot")


@dataclass(frozen=True)
class NPInstance:
    kind: str  # trip_planning | meeting_planning | calendar_scheduling
    level: str
    example: dict[str, Any]  # the benchmark's fields, prompt_0shot and golden_plan included
    domain_pddl: str
    problem_pddl: str
    gold_plan: str  # PDDL plan, one "(action args)" per line
    spec: dict[str, Any]  # the structured statement (no answer), for the loop's JSON spec

    @property
    def bucket_sizes(self) -> dict[str, int]:
        return {k: v for k, v in self.example.items() if k.startswith("num_")}

    def gold_answer_json(self) -> str:
        """What the oracle scores against: the example's fields (golden_plan included), no prompts."""
        return json.dumps({"kind": self.kind, **{k: v for k, v in self.example.items()
                                                 if not k.startswith("prompt_")}}, sort_keys=True)


def pddl_name(text: str) -> str:
    """'Marina District' -> 'marina-district' (PDDL names: letters, digits, '-')."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def plan_steps(plan_text: str) -> list[tuple[str, list[str]]]:
    """'(fly a b d1 d2)' lines -> [('fly', ['a', 'b', 'd1', 'd2'])], lower case; other lines skipped."""
    steps = []
    for line in plan_text.splitlines():
        line = line.split(";")[0].strip()
        if line.startswith("(") and line.endswith(")"):
            name, *args = line.strip("()").lower().split()
            steps.append((name, args))
    return steps

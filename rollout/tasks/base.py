"""A planning task: what the loop is asked to solve, and how its answer is scored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from solvers.params import SpecError

Scoring = Literal["gold_pddl", "checker", "none"]


@dataclass(frozen=True)
class Task:
    task_id: str  # unique and stable, e.g. "planbench/blocksworld/instance-17"
    family: str  # planbench | classical | temporal | natural_plan
    domain_name: str
    description: str  # the natural-language specification the loop starts from
    target_planner: Literal["fd", "temporal"] = "fd"
    scoring: Scoring = "gold_pddl"
    spec_json: str | None = None
    gold_domain: str | None = None
    gold_problem: str | None = None
    gold_plan: str | None = None  # a PDDL plan
    # A benchmark's own answer and checker fields (Natural Plan: JSON of the example's scoring
    # fields and "kind"); the oracle scores a rendered plan against it by the benchmark's rules.
    gold_answer: str | None = None


PLANBENCH_DOMAINS = ("blocksworld", "mystery_blocksworld", "depots", "logistics", "obfuscated_deceptive_logistics")


class TaskSpecError(SpecError):
    """A task spec or task file that cannot be loaded; the message says what and where."""

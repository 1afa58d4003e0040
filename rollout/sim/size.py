"""How large a task is, for the simulated world's size-aware draft.

A real LLM writes worse PDDL for a larger task: more objects to declare, more goal atoms to
state, a longer plan to get right. The simulated world reads the size from the task itself (its
gold problem and gold plan), never from a generator's level label, so a bundled task and a
generated one of the same shape are drafted alike.
"""

from __future__ import annotations

import math

from rollout.pddl.sections import section, typed_list
from rollout.pddl.sexpr import SExpr

_CONNECTIVES = {"and", "or", "not", "imply", "forall", "exists", "preference"}


def goal_atoms(goal: SExpr) -> int:
    """Atoms under a goal formula (through and/or/not/quantifiers)."""
    if not isinstance(goal, list) or not goal:
        return 0
    if isinstance(goal[0], str) and goal[0].lower() in _CONNECTIVES:
        return sum(goal_atoms(part) for part in goal[1:] if isinstance(part, list))
    return 1


def plan_steps(plan: str | None) -> int:
    return sum(1 for line in (plan or "").splitlines() if line.strip().startswith("("))


def task_size(problem: list[SExpr], plan: str | None) -> float:
    """Geometric mean of the problem's objects, its goal atoms and the gold plan's steps.

    Scale-free: doubling every component doubles the size, and no one domain's habit (depots has
    many objects, hanoi long plans) dominates. A task without a gold plan uses the other two.
    Each component counts at least 1.
    """
    objects = len(typed_list((section(problem, ":objects") or [])[1:]))
    goal = section(problem, ":goal")
    parts = [objects, goal_atoms(goal[1]) if goal and len(goal) > 1 else 0]
    steps = plan_steps(plan)
    if steps:
        parts.append(steps)
    return math.exp(sum(math.log(max(1, p)) for p in parts) / len(parts))


def size_excess(size: float, reference: float, exponent: float = 1.0) -> float:
    """ln(size / reference) ** exponent above the reference, 0.0 at or below it (or with no reference).

    An exponent below 1 makes the first steps above the reference count the most: a draft grows
    worse quickly from a small task to a middling one, and more slowly once it is already long.
    """
    if reference <= 0 or size <= reference:
        return 0.0
    return math.log(size / reference) ** exponent

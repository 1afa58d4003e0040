"""Which tasks the simulated world can run: it drafts from gold PDDL, so tasks without it cannot."""

from __future__ import annotations

from collections.abc import Sequence

from rollout.tasks.base import Task


def sim_unrunnable(tasks: Sequence[Task]) -> str | None:
    """None when every task has gold PDDL; else one line saying which cannot run and what to do."""
    missing = [t for t in tasks if not t.gold_domain or not t.gold_problem]
    if not missing:
        return None
    hint = ""
    if any(t.family == "natural_plan" for t in missing):
        hint = ("; Natural Plan's own data files carry no PDDL encoding: score their answers with "
                "`halo tasks score FILE`, or run generated ones (`halo tasks generate natural_plan --out DIR`, "
                "then --tasks gen:DIR)")
    return (f"the simulated world needs gold PDDL, and {len(missing)} of {len(tasks)} tasks have none "
            f"(first: {missing[0].task_id}){hint}")

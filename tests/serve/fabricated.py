"""Fabricated /v1/feedback bodies: what a client holding a feedback key could send to steer the
online loop (every step chooses agent 19, every episode claims validator and oracle success)."""

from __future__ import annotations

from typing import Any

TASK_ID = "planbench/blocksworld/instance-2"
BOGUS_PLAN = "(pick-up nothing)\n(stack nothing nowhere)\n"


def fabricated_body(n: int, *, agent: int = 19, task_id: str = TASK_ID) -> dict[str, Any]:
    from rollout.tasks import find_task

    task = find_task(task_id, "bundled")
    state = {"task_description": task.description, "domain": task.gold_domain, "problem": task.gold_problem,
             "plan": "", "validator_errors": "goal not reached", "error_category": "goal_not_reached",
             "plan_found": False, "plan_valid": False, "history": [], "step": 0}
    steps = []
    for i in range(3):
        steps.append({"step": i, "state": {**state, "step": i, "history": [agent] * i}, "agent_id": agent,
                      "decided_by": "model", "domain_after": task.gold_domain, "problem_after": task.gold_problem,
                      "plan_after": BOGUS_PLAN, "plan_found": True, "plan_valid": True})
    return {"episode_id": f"fabricated-{n}", "llm_backend": "sim", "success_validator": True,
            "success_oracle": True, "task_id": task_id, "family": task.family, "domain_name": "blocksworld",
            "final_plan": BOGUS_PLAN, "seed": n, "steps": steps}

"""Which episodes a job runs: deterministic IDs from (run, task, seed), so a re-run resumes."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from rollout.loop.episode import episode_id_for
from rollout.tasks.base import Task


@dataclass(frozen=True)
class EpisodeSpec:
    episode_id: str
    task_index: int  # into the job's task list (shipped to every worker once)
    task_id: str
    seed: int


def plan_episodes(tasks: list[Task], episodes: int, run_id: str, base_seed: int = 0) -> list[EpisodeSpec]:
    """Episode i runs the i-th task of the domain-interleaved order (mod T) with seed
    base_seed + i div T: every task once, then again; any prefix is a mix of the domains."""
    if not tasks:
        raise ValueError("no tasks to run: the task spec matched nothing")
    if episodes < 1:
        raise ValueError(f"--episodes must be at least 1, got {episodes}")
    order = interleaved_order(tasks)
    specs = []
    for i in range(episodes):
        index = order[i % len(tasks)]
        seed = base_seed + i // len(tasks)
        task_id = tasks[index].task_id
        specs.append(EpisodeSpec(episode_id_for(run_id, task_id, seed), index, task_id, seed))
    return specs


def interleaved_order(tasks: list[Task]) -> list[int]:
    """Task indices round-robin across domains (each domain's tasks in their listed order)."""
    by_domain: dict[str, list[int]] = {}
    for i, task in enumerate(tasks):
        by_domain.setdefault(f"{task.family}/{task.domain_name}", []).append(i)
    queues = list(by_domain.values())
    order: list[int] = []
    for rank in range(max(len(q) for q in queues)):
        order.extend(q[rank] for q in queues if rank < len(q))
    return order


def default_run_id(identity: dict[str, object]) -> str:
    """Same job arguments -> same run ID, so re-running the same command resumes it."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", str(identity.get("policy", "run"))).strip("-")[:40] or "run"
    return f"{slug}-{digest}"

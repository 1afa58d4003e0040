"""`halo rollout --dry-run`: what a job would do, without Ray and without writing anything."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rollout.driver.job import RolloutJob


def plan_summary(job: RolloutJob) -> dict[str, Any]:
    stored = job.store.episode_ids(job.run_id) if job.store.read_run_meta(job.run_id) else set()
    todo = [s for s in job.specs if s.episode_id not in stored]
    domains = Counter(f"{job.tasks[s.task_index].domain_name}" for s in todo or job.specs)
    return {"run_id": job.run_id, "store": job.store.url, "requested": len(job.specs),
            "stored": len(stored & {s.episode_id for s in job.specs}), "to_run": len(todo),
            "domains": dict(domains.most_common()), "estimate": estimate(job, len(todo))}


def estimate(job: RolloutJob, episodes: int) -> str:
    """From this store's earlier runs of the same LLM backend: their episodes per second."""
    from rollout.llm.spec import LLMSpec

    if episodes == 0:
        return "nothing to run"
    backend = LLMSpec.parse(job.config.llm).backend
    done = wall = 0.0
    for info in job.store.list_runs():
        meta = job.store.read_run_meta(info.run_id)
        if meta is None or meta.llm_backend != backend or meta.status != "completed" or not meta.episodes_committed:
            continue
        done += meta.episodes_committed
        wall += max(0.0, meta.updated_at - meta.created_at)
    if not done or wall <= 0:
        return f"no estimate (no completed {backend} run in this store to measure from)"
    rate = done / wall
    return f"about {episodes / rate:.0f}s at {rate:.1f} episodes/s (this store's completed {backend} runs)"

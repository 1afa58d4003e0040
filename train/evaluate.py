"""Evaluation of a trained policy in the refinement loop (`halo eval`).

Every compared policy runs the same tasks with the same episode seeds (so the simulated world
drafts the same faults), with the rules layer first: the trained model, the teacher that
produced its data, a uniformly random policy and the majority-class policy. The table is the
refinement-loop report of rollout/loop/report.py, plus the mean latency of non-rule decisions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from rollout.core.trajectory import EpisodeRecord
from rollout.loop.report import PolicySummary, format_markdown, summarize
from rollout.tasks.base import Task
from train.train_tasks import TRAIN_TASKS_FILE, held_out, write_train_tasks

__all__ = ["TRAIN_TASKS_FILE", "held_out", "write_train_tasks", "evaluate"]


async def run_episodes(tasks: list[Task], policy_spec: str, *, seeds: list[int], run_id: str,
                       concurrency: int = 4, max_steps: int = 10, llm: str = "sim") -> list[EpisodeRecord]:
    from rollout.loop.episode import EpisodeConfig, run_episode
    from rollout.policies import make_policy
    from rollout.sim.spec import sim_config_for

    sim = sim_config_for(llm)  # the simulated world ("sim:world=FILE": a world file)

    sem = asyncio.Semaphore(concurrency)
    policy = make_policy(policy_spec, seed=seeds[0] if seeds else 0)

    async def one(task: Task, seed: int) -> EpisodeRecord:
        async with sem:
            return await run_episode(task, policy, EpisodeConfig(seed=seed, run_id=run_id, max_steps=max_steps,
                                                                 sim=sim))

    try:
        return list(await asyncio.gather(*[one(t, s) for t in tasks for s in seeds]))
    finally:
        policy.close()


@dataclass
class EvalRow:
    label: str
    spec: str
    summary: PolicySummary
    decision_ms: float


def evaluate(model_dir: str | Path, tasks: list[Task], *, teacher: str, episodes: int = 1, seed: int = 0,
             concurrency: int = 4, include: tuple[str, ...] = ("model", "teacher", "random", "majority"),
             llm: str = "sim") -> tuple[list[EvalRow], dict[str, list[EpisodeRecord]]]:
    model_dir = Path(model_dir).resolve()
    specs = {"model": f"rules+model:{model_dir}", "teacher": teacher, "random": "rules+random",
             "majority": f"rules+majority:{model_dir}"}
    seeds = [seed + k for k in range(episodes)]
    rows: list[EvalRow] = []
    records: dict[str, list[EpisodeRecord]] = {}
    for label in include:
        recs = asyncio.run(run_episodes(tasks, specs[label], seeds=seeds, run_id=f"eval-{label}",
                                        concurrency=concurrency, llm=llm))
        records[label] = recs
        lat = [s.decision_latency_ms for r in recs for s in r.steps if not s.is_hardcoded]
        rows.append(EvalRow(label, specs[label], summarize(f"{label} ({specs[label].split(':', 1)[0]})", recs),
                            sum(lat) / len(lat) if lat else 0.0))
    return rows, records


def format_rows(rows: list[EvalRow]) -> str:
    table = format_markdown([r.summary for r in rows])
    lat = "\n".join(f"- {r.label}: `{r.spec}` — mean non-rule decision latency {r.decision_ms:.2f} ms"
                    for r in rows)
    return table + "\n\n" + lat

"""Run whole episodes: a short loop of a policy over a RefinementEnv (rollout/loop/env.py).

The loop ends when the policy picks NoOp (11) on a plan the validator accepts, or when the step
budget runs out; a valid final plan is then rendered in natural language by agent 12 (recorded
as a last, rule-decided step). Agent and solver failures become failed steps, never exceptions;
a dependency failing past its retries (LLM endpoint, student service, a solver that cannot
start) ends the episode with EpisodeRecord.infra_error set (not an outcome, rollout/core/infra.py);
the policy itself breaking (a bug) ends it with EpisodeRecord.error set.
`EpisodeConfig.backend` injects the agent backend; without it the backend follows `llm_backend`
(rollout/loop/backends.py: "sim" is the simulated world, with `sim` as its config and `llm` as transport).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import solvers
from rollout.agents.base import ChatBackend
from rollout.core.decision import Policy
from rollout.core.infra import infra_reason
from rollout.core.trajectory import EpisodeRecord
from rollout.loop.backends import backend_named
from rollout.loop.env import AgentBackend, RefinementEnv
from rollout.tasks.base import Task
from solvers.errors import count_handled


@dataclass
class EpisodeConfig:
    max_steps: int = 10
    llm_backend: str = "sim"  # "sim" or the name of a real backend (e.g. the model)
    seed: int = 0
    run_id: str = "adhoc"
    limits: solvers.Limits = field(default_factory=solvers.Limits)
    sim: Any = None  # the world's config when llm_backend names a registered backend ("sim": a SimConfig)
    llm: ChatBackend | None = None
    code_version: str = ""
    render_natural_language: bool = True
    backend: AgentBackend | None = None  # None: chosen from llm_backend, sim and llm as below

    def agent_backend(self) -> AgentBackend:
        if self.backend is not None:
            return self.backend
        return backend_named(self.llm_backend, self.sim, self.llm)


def episode_id_for(run_id: str, task_id: str, seed: int) -> str:
    digest = hashlib.sha256(f"{run_id}|{task_id}|{seed}".encode()).hexdigest()[:20]
    return f"ep-{digest}"


def _solver_versions() -> str:
    fn = getattr(solvers, "versions", None)
    if fn is None:
        return "{}"
    try:
        return json.dumps(fn(), sort_keys=True, default=str)
    except Exception as exc:  # noqa: BLE001  (the record says it; the episode goes on)
        count_handled("episode: solver versions", exc)
        return json.dumps({"error": str(exc)})


async def run_episode(task: Task, policy: Policy, config: EpisodeConfig, *, episode_id: str | None = None
                      ) -> EpisodeRecord:
    t_start = time.monotonic()
    eid = episode_id or episode_id_for(config.run_id, task.task_id, config.seed)
    backend = config.agent_backend()
    record = EpisodeRecord(
        episode_id=eid, run_id=config.run_id, task_id=task.task_id, family=task.family,
        domain_name=task.domain_name, policy_name=policy.name, policy_version=policy.version,
        llm_backend=backend.name, success_validator=False, success_oracle=None, seed=config.seed,
        code_version=config.code_version, solver_versions=_solver_versions(), created_at=time.time(),
        model_version=getattr(policy, "model_version", ""),
    )
    env = RefinementEnv(backend, limits=config.limits, max_steps=config.max_steps,
                        render_natural_language=config.render_natural_language)
    try:
        state = await env.reset(task, config.seed)
        while not env.done:
            state = (await env.step(await policy.adecide(state))).state
    except Exception as exc:  # noqa: BLE001  (keep what was recorded)
        count_handled("episode", exc)
        record.infra_error = infra_reason(exc)  # a dependency failed: not an outcome (rollout/core/infra.py)
        if not record.infra_error:  # the policy or the code broke
            record.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"[-2000:]
    finally:
        env.close()
    record.steps, record.solver_cpu_s = env.steps, env.solver_cpu_s
    if env.end is not None:
        record.final_plan, record.success_validator = env.end.final_plan, env.end.success_validator
        record.natural_language_plan, record.success_oracle = env.end.natural_language_plan, env.end.success_oracle
    record.total_llm_calls = sum(s.llm_calls for s in record.steps)
    record.total_tokens_in = sum(s.tokens_in for s in record.steps)
    record.total_tokens_out = sum(s.tokens_out for s in record.steps)
    record.total_cost_usd = sum(s.cost_usd for s in record.steps)
    record.wall_s = time.monotonic() - t_start
    return record


def run_episode_sync(task: Task, policy: Policy, config: EpisodeConfig, *, episode_id: str | None = None
                     ) -> EpisodeRecord:
    return asyncio.run(run_episode(task, policy, config, episode_id=episode_id))


async def run_episodes(tasks: list[Task], policy: Policy, config: EpisodeConfig, *, concurrency: int = 4
                       ) -> list[EpisodeRecord]:
    """Run many episodes in one event loop, at most `concurrency` at a time, in task order."""
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(task: Task) -> EpisodeRecord:
        async with sem:
            return await run_episode(task, policy, config)

    return list(await asyncio.gather(*(one(t) for t in tasks)))

"""A plan job's loop restored from a checkpoint goes exactly where the uninterrupted loop goes:
the same steps, agents, PDDL and verdicts (real planner and validator, the simulated world), and
no step before the checkpoint runs again. No Ray here: the service test restarts a real service."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from rollout.core.trajectory import StepRecord
from rollout.policies.rules import RulesFirst
from rollout.policies.scripted import ScriptedPolicy
from rollout.sim.backend import SimAgents
from rollout.sim.world import SimConfig
from rollout.tasks import load_tasks
from serve.plan_episode import Budget, ResumableEnv, run_plan

TASK_ID = "planbench/blocksworld/instance-3"


def _task():
    return next(t for t in load_tasks("bundled") if t.task_id == TASK_ID)


def _policy():
    return RulesFirst(ScriptedPolicy())


async def _run(seed: int, stop_after: int | None, checkpoints: list, applied: list) -> list[StepRecord]:
    env = ResumableEnv(SimAgents(SimConfig()), max_steps=12)

    async def on_steps(records, checkpoint):
        applied.extend(r.step for r in records)
        checkpoints.append((json.loads(json.dumps(checkpoint)), [StepRecord(**vars(r)) for r in env.steps]))
        if stop_after is not None and len(env.steps) >= stop_after:
            raise asyncio.CancelledError  # the service dies here, after the step was committed

    state = await env.start(_task(), seed)
    budget = Budget(max_steps=12, max_llm_calls=1000, max_usd=100.0, max_seconds=60.0)
    with contextlib.suppress(asyncio.CancelledError):
        await run_plan(env, _policy(), state, budget, on_steps)
    return env.steps


async def _resume(seed: int, checkpoint: dict, steps: list, applied: list) -> list[StepRecord]:
    env = ResumableEnv(SimAgents(SimConfig()), max_steps=12)
    state = env.restore(_task(), seed, checkpoint, steps)

    async def on_steps(records, _checkpoint):
        applied.extend(r.step for r in records)

    await run_plan(env, _policy(), state, Budget(12, 1000, 100.0, 60.0), on_steps)
    return env.steps


def _key(step: StepRecord) -> tuple:
    return (step.step, step.agent_id, step.domain_after, step.problem_after, step.plan_after, step.plan_valid,
            step.llm_calls, step.tokens_out, round(step.latency_ms, 6))


@pytest.mark.parametrize("seed", [1, 4])
def test_a_restored_loop_takes_the_uninterrupted_path_and_runs_no_step_twice(seed):
    whole = asyncio.run(_run(seed, None, [], []))
    assert len(whole) >= 3, "the episode should be long enough to interrupt"
    cut = 2
    checkpoints: list = []
    first_applied: list = []
    asyncio.run(_run(seed, cut, checkpoints, first_applied))
    checkpoint, committed = checkpoints[-1]
    second_applied: list = []
    resumed = asyncio.run(_resume(seed, checkpoint, committed, second_applied))
    assert [_key(s) for s in resumed] == [_key(s) for s in whole]
    assert sorted(first_applied + second_applied) == [s.step for s in whole]  # each step applied once
    assert not set(first_applied) & set(second_applied)


def test_a_budget_that_runs_out_stops_the_loop_with_the_reason():
    env = ResumableEnv(SimAgents(SimConfig()), max_steps=12)

    async def go():
        state = await env.start(_task(), 1)

        async def on_steps(_records, _checkpoint):
            return None

        return await run_plan(env, _policy(), state, Budget(12, 1, 100.0, 60.0), on_steps)

    reason = asyncio.run(go())
    assert reason.startswith("budget exhausted: ") and "max_llm_calls=1" in reason
    assert sum(s.llm_calls for s in env.steps) <= 2

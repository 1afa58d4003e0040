"""Forking the refinement-loop environment (rollout/loop/env.py): snapshot, restore, fork.

Two branches from one snapshot that take the same decisions must write byte-identical records,
but for the one field that is a stopwatch reading: the latency of a step no LLM took part in (a
deterministic agent's measured wall time; an LLM step's latency is simulated and must match).
The solvers' result cache is on (as search runs it): a planner's log carries its own timings, so
only a second answer from the cache is the same text; everything else in a record is decided by
the state, the decisions and the random streams the snapshot copies.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict

import pytest

import solvers
from rollout.core.agent_table import AgentId
from rollout.core.decision import Decision
from rollout.loop.env import EnvStateError, RefinementEnv
from rollout.policies import make_policy
from rollout.sim import SimConfig
from rollout.sim.backend import SimAgents
from rollout.tasks import Task

FAST = SimConfig(latency_scale=0.0)


@pytest.fixture(autouse=True)
def solver_cache():
    solvers.configure_cache(True)
    yield
    solvers.configure_cache(False)


def _bytes(env: RefinementEnv) -> bytes:
    end = asdict(env.end) if env.end is not None else None
    steps = [asdict(s) for s in env.steps]
    for step in steps:
        if not step["llm_calls"]:
            step["latency_ms"] = "measured"  # a stopwatch reading of a solver-only step
    return json.dumps({"steps": steps, "end": end}, sort_keys=True).encode()


async def _greedy(env: RefinementEnv, seed: int) -> list[Decision]:
    policy = make_policy("rules+scripted", seed=seed)
    decisions = []
    while not env.done:
        decisions.append(await policy.adecide(env.state))
        await env.step(decisions[-1])
    return decisions


async def _replay(env: RefinementEnv, decisions: list[Decision]) -> None:
    for decision in decisions:
        if env.done:
            break
        await env.step(decision)


@pytest.mark.parametrize("at", [0, 1, 3])
def test_branches_replaying_the_same_decisions_write_identical_records(tasks: dict[str, Task], at: int) -> None:
    async def go(task: Task, seed: int) -> None:
        env = RefinementEnv(SimAgents(FAST))
        await env.reset(task, seed)
        policy = make_policy("rules+scripted", seed=seed)
        for _ in range(at):
            if not env.done:
                await env.step(await policy.adecide(env.state))
        snap = env.snapshot()
        twin, again = env.fork(), RefinementEnv(SimAgents(FAST))
        decisions = await _greedy(env, seed)  # the original goes on; the branches replay it
        await _replay(twin, decisions)
        again.restore(snap)
        await _replay(again, decisions)
        assert twin.done and again.done
        assert _bytes(twin) == _bytes(env) == _bytes(again), (task.task_id, seed, at)
        env.restore(snap)  # the snapshot is still the point it was taken at
        await _replay(env, decisions)
        assert _bytes(env) == _bytes(twin)

    for task in list(tasks.values())[:4]:
        for seed in (1, 7):
            asyncio.run(go(task, seed))


def test_a_fork_is_independent_of_the_original(tasks: dict[str, Task]) -> None:
    async def go() -> None:
        task = next(t for t in tasks.values() if "blocksworld" in t.task_id)
        env = RefinementEnv(SimAgents(FAST))
        await env.reset(task, 5)
        before_state, before_faults = env.state.to_json(), list(env._world.faults)
        before_rng = env._world.rng.getstate()
        twin = env.fork()
        await _greedy(twin, 5)
        assert twin.done and twin.steps
        assert env.state.to_json() == before_state and env.steps == [] and not env.done
        assert env._world.faults == before_faults and env._world.rng.getstate() == before_rng
        assert twin._world is not env._world and twin._world.task is env._world.task  # the task is shared

    asyncio.run(go())


def test_snapshot_and_restore_refuse_a_closed_environment(tasks: dict[str, Task]) -> None:
    async def go() -> None:
        env = RefinementEnv(SimAgents(FAST))
        await env.reset(next(iter(tasks.values())), 0)
        snap = env.snapshot()
        env.close()
        with pytest.raises(EnvStateError, match="closed"):
            env.snapshot()
        with pytest.raises(EnvStateError, match="closed"):
            env.restore(snap)

    asyncio.run(go())


def test_a_plan_accepted_at_the_step_limit_waits_for_its_checks_when_held(tasks: dict[str, Task]) -> None:
    """A search holds an episode whose last allowed step gives a plan the validator accepts, so the
    plan gets its acceptance checks before the NoOp accepts it; the greedy loop ends it at once."""
    async def last_step_accepts(task: Task, seed: int) -> list[Decision] | None:
        env = RefinementEnv(SimAgents(FAST))
        await env.reset(task, seed)
        decisions = await _greedy(env, seed)
        if decisions[-1].agent_id == AgentId.NOOP:
            decisions = decisions[:-1]  # the NoOp left out: the step before it gave the plan
        if not env.end.success_validator or not decisions:
            return None
        return decisions

    async def replay(task: Task, seed: int, decisions: list[Decision], hold: bool) -> RefinementEnv:
        env = RefinementEnv(SimAgents(FAST), max_steps=len(decisions))
        env.hold_valid_at_limit = hold
        await env.reset(task, seed)
        await _replay(env, decisions)
        return env

    async def go() -> int:
        found = 0
        for task in tasks.values():
            for seed in (1, 7):
                decisions = await last_step_accepts(task, seed)
                if decisions is None:
                    continue
                found += 1
                greedy = await replay(task, seed, decisions, hold=False)
                assert greedy.done and greedy.end.success_validator
                held = await replay(task, seed, decisions, hold=True)
                assert not held.done and held.state.plan_valid and held.steps_left == 0
                assert held.fork().hold_valid_at_limit
                assert await held.check_acceptance() is not None  # the check runs on the held plan
                await held.step(Decision(AgentId.NOOP, "rule", reason="accept"))
                assert held.done and held.end.success_validator
        return found

    assert asyncio.run(go()) > 0, "no episode gave its plan on its last step"

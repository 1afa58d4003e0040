"""Concurrent branches of a search (rollout/policies/search.py, `parallel=P`): the children of a
round run as concurrent asyncio work through the process's LLM gate, and the records are those of
the same rounds run one child after another, whatever order the children finish in."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict

import pytest

from rollout.core.trajectory import EpisodeRecord
from rollout.llm.budget import llm_gate
from rollout.loop.episode import EpisodeConfig, run_episode
from rollout.policies import make_policy
from rollout.policies.search import SearchPolicy, SearchSpec, parse_search_spec
from rollout.sim import SimConfig
from rollout.tasks import Task

# calls sleep a few ms with the world's lognormal spread, so concurrent children finish out of order
JITTERED = SimConfig(latency_scale=0.002)
SPEC = "search:prior=rules+scripted,width=3,max_calls=16,parallel=3"


pytestmark = pytest.mark.usefixtures("solver_cache")


def _policy(spec: str, seed: int, *, concurrent: bool) -> SearchPolicy:
    policy = make_policy(spec, seed=seed)
    assert isinstance(policy, SearchPolicy)
    policy.concurrent = concurrent
    return policy


async def _episode(task: Task, seed: int, spec: str, *, concurrent: bool) -> tuple[EpisodeRecord, int]:
    """The episode and the most LLM calls the process's gate saw in flight at once during it."""
    most = 0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal most
        while not done.is_set():
            most = max(most, llm_gate().stats.in_flight)
            await asyncio.sleep(0.0005)

    watcher = asyncio.create_task(watch())
    config = EpisodeConfig(seed=seed, sim=JITTERED, run_id="search-concurrent")
    try:
        record = await run_episode(task, _policy(spec, seed, concurrent=concurrent), config)
    finally:
        done.set()
        await watcher
    return record, most


def _tree(record: EpisodeRecord) -> str:
    steps = [asdict(s) for s in record.steps]
    for step in steps:
        step["decision_latency_ms"] = "measured"  # how long the prior took to decide: a stopwatch
        if not step["llm_calls"]:
            step["latency_ms"] = "measured"  # a stopwatch reading of a solver-only step
    return json.dumps({"steps": steps, "oracle": record.success_oracle, "plan": record.final_plan}, sort_keys=True)


def test_parallel_is_a_search_key() -> None:
    assert parse_search_spec("parallel=4,width=2") == SearchSpec(width=2, parallel=4)
    assert parse_search_spec("").parallel == 1


def test_concurrent_and_serial_rounds_write_identical_records(tasks: dict[str, Task]) -> None:
    async def go() -> list[tuple[EpisodeRecord, int, EpisodeRecord, int]]:
        pairs = []
        for task in list(tasks.values())[:5]:
            for seed in (0, 3):
                concurrent, most_c = await _episode(task, seed, SPEC, concurrent=True)
                serial, most_s = await _episode(task, seed, SPEC, concurrent=False)
                pairs.append((concurrent, most_c, serial, most_s))
        return pairs

    pairs = asyncio.run(go())
    for concurrent, _, serial, most_serial in pairs:
        assert not (concurrent.error or concurrent.infra_error), concurrent.error
        assert _tree(concurrent) == _tree(serial), concurrent.task_id
        assert most_serial <= 1  # one call at a time when a round's children run in turn
    assert max(most for _, most, _, _ in pairs) >= 2  # children's calls overlapped through the gate
    assert any(not s.on_path for c, _, _, _ in pairs for s in c.steps)  # the searches branched


@pytest.mark.parametrize(("max_calls", "checks"), [(4, 0), (7, 0), (5, 1)])
def test_the_call_bound_holds_under_concurrency(tasks: dict[str, Task], max_calls: int, checks: int) -> None:
    # Every unfinished round would take `parallel` children; without the reservation the last
    # round would start children past the bound (with checks=0 a search spends no call past it).
    spec = f"search:prior=rules+scripted,width=3,max_calls={max_calls},checks={checks},parallel=4"

    async def go() -> list[EpisodeRecord]:
        return [(await _episode(task, 1, spec, concurrent=True))[0] for task in list(tasks.values())[:6]]

    records = asyncio.run(go())
    for record in records:
        search_calls = sum(s.llm_calls for s in record.steps if s.agent_name != "AgentNaturalLanguage")
        # the closing acceptance check of the best node (checks=1) comes past the budget, as serially
        assert search_calls <= max_calls + checks, (record.task_id, search_calls)
    assert any(sum(s.llm_calls for s in r.steps) >= max_calls for r in records)  # the bound was reached

"""The refinement loop: termination, records, reproducibility, failure handling."""

from __future__ import annotations

import asyncio
import json
from dataclasses import fields

import pytest

from rollout.agents.base import Agent, AgentContext, AgentOutcome
from rollout.core.agent_table import AGENTS, AgentId
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.core.trajectory import NOT_STORED, EpisodeRecord, StepRecord, episodes_to_table, table_to_episodes
from rollout.loop.episode import EpisodeConfig, episode_id_for, run_episode, run_episode_sync, run_episodes
from rollout.policies import make_policy
from rollout.sim import SimConfig
from rollout.tasks import load_tasks

FAST = SimConfig(latency_scale=0.0)


class Fixed(Policy):
    """Always the same agent (a test double for a policy, not for any solver)."""

    name = "fixed"

    def __init__(self, agent_id: int) -> None:
        self.agent_id = agent_id

    def _decide(self, state: EpisodeState) -> Decision:
        return Decision(self.agent_id, "scripted", reason="fixed")


class Exploding(Policy):
    name = "exploding"

    def _decide(self, state: EpisodeState) -> Decision:
        raise ConnectionError("decision endpoint unreachable")


def test_budget_ends_the_loop() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    # agent 6 has nothing to fix in blocksworld: the plan never becomes valid by itself
    config = EpisodeConfig(max_steps=3, seed=7, sim=SimConfig(empty_start_prob=1.0, latency_scale=0.0))
    record = run_episode_sync(task, Fixed(6), config)
    assert len(record.steps) == 3 and not record.success_validator and record.success_oracle is False
    assert all(s.agent_id == 6 and s.llm_calls == 1 for s in record.steps)
    assert record.error == ""


def test_noop_on_valid_plan_ends_the_loop_then_agent_12_renders() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    clean = SimConfig(fault_count_weights=(1.0,), plan_fault_prob=0.0, empty_start_prob=0.0, latency_scale=0.0)
    record = run_episode_sync(task, make_policy("rules+scripted"), EpisodeConfig(seed=1, sim=clean))
    assert [s.agent_id for s in record.steps] == [AgentId.NOOP, AgentId.NATURAL_LANGUAGE]
    assert record.steps[0].is_hardcoded and record.steps[0].decided_by == "rule"
    assert record.success_validator and record.success_oracle
    assert record.natural_language_plan.startswith("1. ")
    assert record.total_llm_calls == 1  # only the rendering


def test_noop_on_invalid_plan_does_not_end_the_loop() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    config = EpisodeConfig(max_steps=2, seed=3, sim=SimConfig(empty_start_prob=1.0, latency_scale=0.0))
    record = run_episode_sync(task, Fixed(AgentId.NOOP), config)
    assert len(record.steps) == 2 and all("rejects" in s.agent_message for s in record.steps)


def test_rules_layer_decisions_in_episodes() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    config = EpisodeConfig(seed=0, sim=SimConfig(empty_start_prob=1.0, latency_scale=0.0))
    record = run_episode_sync(task, make_policy("rules+random"), config)
    first = record.steps[0]
    assert first.agent_id == 2 and first.decided_by == "rule" and first.is_hardcoded
    assert first.decision_reason == "empty domain"
    for s in record.steps:
        state = EpisodeState.from_json(s.state_json)
        if s.agent_id != AgentId.NATURAL_LANGUAGE and state.plan_valid:
            assert s.agent_id == AgentId.NOOP and s.is_hardcoded
        if state.error_category.startswith("parse_error"):
            assert s.agent_id == 9 and s.is_hardcoded


def test_record_is_filled_and_round_trips() -> None:
    tasks = load_tasks("planbench:blocksworld:4")
    records = asyncio.run(run_episodes(tasks, make_policy("rules+scripted"), EpisodeConfig(seed=5, sim=FAST,
                                                                                            run_id="t")))
    for task, rec in zip(tasks, records, strict=True):
        assert rec.task_id == task.task_id and rec.llm_backend == "sim" and rec.run_id == "t"
        assert rec.episode_id == episode_id_for("t", task.task_id, 5)
        assert rec.policy_name == "rules+scripted" and rec.family == "planbench"
        assert json.loads(rec.solver_versions) is not None
        assert rec.total_llm_calls == sum(s.llm_calls for s in rec.steps)
        assert rec.total_cost_usd == pytest.approx(sum(s.cost_usd for s in rec.steps))
        assert rec.wall_s > 0 and rec.created_at > 0
        for s in rec.steps:
            EpisodeState.from_json(s.state_json)
            assert s.agent_name and s.decided_by
            if s.llm_calls:
                assert s.tokens_in > 0 and s.tokens_out > 0 and s.latency_ms > 0 and s.cost_usd > 0
    back = {r.episode_id: r for r in table_to_episodes(episodes_to_table(records))}
    for rec in records:
        assert back[rec.episode_id] == rec


def test_reproducible_by_seed_and_varies_across_seeds() -> None:
    tasks = load_tasks("planbench:blocksworld:6")

    def signature(seed: int, concurrency: int) -> list:
        recs = asyncio.run(run_episodes(tasks, make_policy("scripted:noise=0.3"), EpisodeConfig(seed=seed, sim=FAST),
                                        concurrency=concurrency))
        return [(r.episode_id, [(s.agent_id, s.error_category, s.plan_after, s.tokens_out) for s in r.steps],
                 r.success_oracle) for r in recs]

    assert signature(11, 1) == signature(11, 4)
    assert signature(11, 2) != signature(12, 2)


def test_agent_exception_is_a_failed_step() -> None:
    class Broken(Agent):
        agent_id = 6

        async def apply(self, state: EpisodeState, ctx: AgentContext, *, dynamic_profile: str | None = None
                        ) -> AgentOutcome:
            raise RuntimeError("boom")

    task = load_tasks("planbench:blocksworld:1")[0]
    original = AGENTS.get("6")
    AGENTS.register("6", Broken)
    try:
        record = run_episode_sync(task, Fixed(6), EpisodeConfig(max_steps=2, sim=FAST))
    finally:
        AGENTS.register("6", original)
    assert record.error == "" and [s.agent_id for s in record.steps[:2]] == [6, 6]
    assert not record.steps[0].agent_ok and "raised RuntimeError: boom" in record.steps[0].agent_message


def test_policy_failure_and_unknown_agent_are_recorded_not_raised() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    record = run_episode_sync(task, Exploding(), EpisodeConfig(max_steps=2, sim=FAST))
    assert "decision endpoint unreachable" in record.error and record.steps == []
    record = run_episode_sync(task, Fixed(57), EpisodeConfig(max_steps=2, sim=FAST))
    assert record.error and not record.success_validator


def test_agent_without_backend_fails_the_step_not_the_episode() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    config = EpisodeConfig(max_steps=2, llm_backend="none-configured", sim=None)
    record = run_episode_sync(task, make_policy("rules+scripted"), config)
    assert record.error == ""
    assert record.steps[0].agent_id == 2 and not record.steps[0].agent_ok
    assert "no LLM backend" in record.steps[0].agent_message


def test_dynamic_agent_runs_in_the_sim() -> None:
    class Dyn(Policy):
        name = "dyn"

        def _decide(self, state: EpisodeState) -> Decision:
            return Decision(21, "scripted", dynamic_profile="Check every precondition against the statement.")

    task = load_tasks("planbench:blocksworld:1")[0]
    record = run_episode_sync(task, Dyn(), EpisodeConfig(max_steps=2, sim=FAST))
    assert [s.agent_name for s in record.steps[:2]] == ["DynamicAgent", "DynamicAgent"]
    assert record.steps[0].llm_calls == 1


def test_temporal_task_episode_uses_the_temporal_planner() -> None:
    task = load_tasks("temporal:bundled")[0]
    clean = SimConfig(fault_count_weights=(1.0,), empty_start_prob=0.0, latency_scale=0.0)
    record = run_episode_sync(task, make_policy("rules+scripted"), EpisodeConfig(seed=0, sim=clean))
    assert record.success_validator, record.steps[0].state_json[-500:]
    assert record.success_oracle
    assert "[" in record.final_plan  # durations


def test_step_record_fields_all_set() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    record = asyncio.run(run_episode(task, make_policy("rules+scripted"), EpisodeConfig(seed=2, sim=FAST)))
    names = {f.name for f in fields(StepRecord)}
    assert names <= set(record.to_rows()[0])
    stored = {f.name for f in fields(EpisodeRecord)} - {"steps"} - NOT_STORED
    assert stored <= set(record.to_rows()[0]) and not NOT_STORED & set(record.to_rows()[0])

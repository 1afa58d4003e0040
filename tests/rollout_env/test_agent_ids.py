"""AgentId names every agent in code; plain integers stay on the wire and in records."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace

import pytest

from rollout.core.agent_table import AGENT_IDS, AGENT_TABLE, NUM_AGENTS, AgentId, agent_name
from rollout.core.decision import Decision
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, episodes_to_table, table_to_episodes
from rollout.loop.episode import EpisodeConfig, run_episode
from rollout.policies import make_policy
from rollout.sim import SimConfig
from rollout.sim.backend import SimAgents
from rollout.sim.faults import CATALOG
from rollout.tasks import load_tasks


def _member_name(table_name: str) -> str:
    if table_name == "NoOpAgent":
        return "NOOP"
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", table_name.removeprefix("Agent")).upper()


def test_the_ids_are_the_tables_rows_and_the_dynamic_agent() -> None:
    assert [int(a) for a in AgentId] == list(range(NUM_AGENTS + 1))
    assert tuple(range(NUM_AGENTS)) == AGENT_IDS and AgentId.DYNAMIC == NUM_AGENTS
    for info in AGENT_TABLE:
        assert info.agent_id is AgentId(info.agent_id)
        assert AgentId(info.agent_id).name == _member_name(info.name), info.name
    assert agent_name(AgentId.DYNAMIC) == "DynamicAgent" and agent_name(11) == "NoOpAgent"


def test_a_decision_travels_and_a_history_is_kept_as_plain_ints() -> None:
    decision = Decision(AgentId.NOOP, "rule")
    assert decision.agent_id == 11 and decision.agent_name == "NoOpAgent"
    wire = decision.to_dict()
    assert type(wire["agent_id"]) is int
    assert type(replace(decision, agent_id=AgentId.DYNAMIC).to_dict()["agent_id"]) is int
    assert json.dumps(wire) == json.dumps({**wire, "agent_id": 11})
    assert Decision.from_dict(json.loads(json.dumps(wire))) == decision
    history = EpisodeState("t", history=[2]).with_history(AgentId.SYNTAX_PDDL)
    assert history == [2, 9] and all(type(a) is int for a in history)
    assert repr(history) == "[2, 9]"  # trained features hash the history's text


def test_the_fault_catalog_names_its_repairers() -> None:
    assert all(isinstance(a, AgentId) for fc in CATALOG.values() for a in fc.repaired_by)
    assert CATALOG["swapped_args"].repaired_by == (AgentId.VARIABLE_SWAPPER,) == (13,)


def _records(policy: str) -> list[EpisodeRecord]:
    tasks = load_tasks("planbench:blocksworld:2")
    config = SimConfig(latency_scale=0.0)
    pol = make_policy(policy, seed=1)

    async def run() -> list[EpisodeRecord]:
        return [await run_episode(t, pol, EpisodeConfig(max_steps=6, seed=s, backend=SimAgents(config)))
                for t in tasks for s in (0, 1)]

    return asyncio.run(run())


@pytest.mark.parametrize("policy", ["rules+scripted:noise=0.3", "rules+teacher:model=sim", "rules+dyn:scripted"])
def test_records_and_their_parquet_rows_carry_plain_ints(policy: str) -> None:
    records = _records(policy)
    steps = [s for r in records for s in r.steps]
    assert steps
    assert all(type(s.agent_id) is int for s in steps)
    assert all(type(a) is int for s in steps for a in json.loads(s.state_json)["history"])
    table = episodes_to_table(records)
    assert str(table.schema.field("agent_id").type).startswith("int")
    assert [s.agent_id for r in table_to_episodes(table) for s in r.steps] == [s.agent_id for s in steps]

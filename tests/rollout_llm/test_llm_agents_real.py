"""LLM agents over a real chat client and the local fake endpoint: prompts, extraction, failures."""

from __future__ import annotations

import asyncio
import random

import pytest

import solvers
from rollout.agents.base import AgentContext, make_agent
from rollout.agents.llm_call import run_real_llm_agent
from rollout.agents.prompts import FD_REQUIREMENTS, PROMPTS, TEMPORAL_REQUIREMENTS, build_messages
from rollout.core.agent_table import AGENT_TABLE, AgentId
from rollout.core.state import EpisodeState
from rollout.llm import LLMConfig, OpenAIChatClient, PriceTable
from rollout.tasks.base import Task
from tests.fake_openai import FakeOpenAI, Reply

TASK = Task("t/1", "planbench", "blocksworld", "Put block c on block a.")


@pytest.fixture
def server():
    with FakeOpenAI() as srv:
        yield srv


def ctx_for(server: FakeOpenAI, task: Task = TASK) -> AgentContext:
    prices = PriceTable.from_dict({"models": {"m": {"input": 1.0, "output": 2.0}}})
    client = OpenAIChatClient(LLMConfig(base_url=server.base_url, model="m", timeout_s=2, backoff_base_s=0.01,
                                        max_attempts=2, prices=prices))
    return AgentContext(task=task, limits=solvers.Limits(), rng=random.Random(0), llm=client,
                        llm_backend_name="openai:m")


def test_every_llm_agent_has_its_own_prompt():
    llm_ids = {a.agent_id for a in AGENT_TABLE if a.kind == "llm"}
    assert set(PROMPTS) == llm_ids
    texts = [p.instructions for p in PROMPTS.values()]
    assert len(set(texts)) == len(texts)
    state = EpisodeState("spec text", domain="(define (domain d))", plan="(a)", validator_errors="step 1 bad",
                         history=[2, 9])
    for agent_id in llm_ids:
        system, user = build_messages(agent_id, state, TASK)
        assert system["role"] == "system" and "spec text" in user["content"]
        assert "AgentEmergency, AgentSyntaxPDDL" in user["content"]
        if PROMPTS[agent_id].output == "pddl":
            assert FD_REQUIREMENTS in system["content"] and "<domain>" in system["content"]
    temporal = Task("t/2", "temporal", "rovers", "drive", target_planner="temporal")
    assert TEMPORAL_REQUIREMENTS in build_messages(9, state, temporal)[0]["content"]
    assert "<solution>" in build_messages(3, state, TASK)[0]["content"]
    assert "<instructions>" in build_messages(12, state, TASK)[0]["content"]
    assert "Task profile: fix the goal" in build_messages(AgentId.DYNAMIC, state, TASK, "fix the goal")[0]["content"]


def test_agent_rewrites_pddl_from_reply(server, blocksworld):
    d, p = blocksworld
    server.script(Reply.text(f"Fixed.\n<domain>{d}</domain>\n<problem>{p}</problem>", prompt_tokens=100,
                             completion_tokens=50))
    state = EpisodeState("spec", domain="(define (domain broken", problem="")
    out = asyncio.run(make_agent(9).apply(state, ctx_for(server)))
    assert out.ok and out.domain.strip() == d.strip() and out.problem.strip() == p.strip()
    assert (out.llm_calls, out.tokens_in, out.tokens_out) == (1, 100, 50)
    assert out.cost_usd == pytest.approx(200 / 1e6) and "rewrote the domain and problem" in out.message
    sent = server.requests[0]["messages"]
    assert "syntax" in sent[0]["content"] and "(define (domain broken" in sent[1]["content"]


def test_no_pddl_reply_is_failed_step_with_clear_message(server):
    server.script(Reply.text("I'm not sure what you mean."))
    state = EpisodeState("spec", domain="(define (domain d))", problem="(define (problem p))", plan="(x)\n")
    out = asyncio.run(make_agent(1).apply(state, ctx_for(server)))
    assert not out.ok and "unusable reply" in out.message and "holds no domain and problem" in out.message
    assert out.domain == state.domain and out.problem == state.problem and out.llm_calls == 1


def test_endpoint_failure_is_an_infra_failure_not_a_failed_step(server):
    from rollout.core.infra import infra_reason
    from rollout.llm.errors import LLMError

    server.script(Reply.status(500), Reply.status(500))
    state = EpisodeState("spec", domain="(define (domain d))")
    with pytest.raises(LLMError) as caught:
        asyncio.run(make_agent(20).apply(state, ctx_for(server)))
    assert caught.value.kind == "server_error" and caught.value.attempts == 2
    assert infra_reason(caught.value).startswith("llm:server_error")


def test_problem_only_agent_keeps_domain(server):
    server.script(Reply.text("<problem>(define (problem q) (:domain d) (:init) (:goal (and)))</problem>"))
    state = EpisodeState("spec", domain="(define (domain d))", problem="(define (problem p))")
    out = asyncio.run(make_agent(20).apply(state, ctx_for(server)))
    assert out.ok and out.domain == state.domain and "(problem q)" in out.problem


def test_solution_and_instructions_agents(server):
    server.script(Reply.text("<solution>1. unstack d from c</solution>"),
                  Reply.text("<instructions>\n1. Lift d.\n2. Put d down.\n</instructions>"))
    state = EpisodeState("spec", domain="(define (domain d))", problem="(define (problem p))", plan="(a)\n(b)\n")
    ctx = ctx_for(server)
    out3 = asyncio.run(make_agent(3).apply(state, ctx))
    assert out3.ok and out3.proposed_solution == "1. unstack d from c" and out3.domain == state.domain
    out12 = asyncio.run(make_agent(12).apply(state, ctx))
    assert out12.ok and out12.natural_language.startswith("1. Lift d.") and out12.plan == state.plan


def test_dynamic_agent_uses_profile(server):
    server.script(Reply.text("nothing useful"))
    state = EpisodeState("spec", domain="(define (domain d))")
    out = asyncio.run(run_real_llm_agent(AgentId.DYNAMIC, state, ctx_for(server), "add a (free ?r) fact"))
    assert not out.ok and out.message.startswith("DynamicAgent:")
    assert "add a (free ?r) fact" in server.requests[0]["messages"][0]["content"]

"""The prompted teacher: answer parsing, retries, logged fallback, dynamic agent, accounting."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rollout.core.agent_table import AgentId
from rollout.core.state import EpisodeState
from rollout.llm import LLMConfig, OpenAIChatClient, PriceTable
from rollout.policies import make_policy
from rollout.policies.rules import RulesFirst
from rollout.policies.teacher import TeacherPolicy, UnusableAnswer, parse_answer
from tests.fake_openai import FakeOpenAI, Reply

STATE = EpisodeState("Stack c on a.", domain="(define (domain bw))", problem="(define (problem p))",
                     plan="(stack a c)\n", plan_found=True, error_category="plan_invalid",
                     validator_errors="step 1 (stack a c): precondition false", history=[2, 13])


@pytest.mark.parametrize("reply,expected", [
    ("Agent: AgentVariableSwapper\nReason: swapped args", 13),
    ("agent: 14", 14),
    ("Selected Agent: AgentActionReorderer", 14),
    ("AgentSyntaxPDDL", 9),
    ("**Agent:** `AgentPlanTruncator`", 16),
    ("13", 13),
    ("I would pick AgentSubplanFiller here since a step is missing.", 17),
    ("Agent: NoOpAgent", 11),
    ("Agent: InitialStateSuggester", 20),
    ("Agent: 13 (AgentVariableSwapper)", 13),
    ("Thinking... AgentEmergency might work but no.\nAgent: AgentDeepThinkPDDL", 1),
])
def test_parse_answer_tolerant(reply, expected):
    assert parse_answer(reply).agent_id == expected


@pytest.mark.parametrize("reply", ["", "Agent: AgentMagic", "Agent: 42", "either AgentEmergency or AgentSyntaxPDDL",
                                   "no idea", "DynamicAgent: fix the goal"])
def test_parse_answer_rejects(reply):
    with pytest.raises(UnusableAnswer):
        parse_answer(reply)


def test_parse_dynamic_agent():
    got = parse_answer("DynamicAgent: add missing (clear ?x) facts\nReason: none fits", allow_dynamic=True)
    assert got.agent_id == AgentId.DYNAMIC and got.dynamic_profile == "add missing (clear ?x) facts"


@pytest.fixture
def server():
    with FakeOpenAI() as srv:
        yield srv


def teacher(server: FakeOpenAI, **kw) -> TeacherPolicy:
    prices = PriceTable.from_dict({"models": {"t": {"input": 1.0, "output": 1.0}}})
    client = OpenAIChatClient(LLMConfig(base_url=server.base_url, model="t", timeout_s=2, backoff_base_s=0.01,
                                        max_attempts=2, prices=prices))
    return TeacherPolicy(client, model_name="t", **kw)


def test_teacher_decides_and_accounts(server):
    server.script(Reply.text("Agent: AgentVariableSwapper\nReason: arguments look swapped",
                             prompt_tokens=400, completion_tokens=10))
    d = asyncio.run(teacher(server).adecide(STATE))
    assert (d.agent_id, d.decided_by, d.reason) == (13, "teacher", "arguments look swapped")
    assert (d.llm_calls, d.tokens_in, d.tokens_out) == (1, 400, 10) and d.cost_usd == pytest.approx(410 / 1e6)
    assert d.latency_ms > 0 and d.policy_version == "teacher/t"
    system, user = server.requests[0]["messages"]
    assert "20 AgentInitialStateSuggester" in system["content"]
    assert "AgentEmergency, AgentVariableSwapper" in user["content"] and "precondition false" in user["content"]


def test_unknown_answer_is_retried_then_accepted(server):
    server.script(Reply.text("Agent: AgentMagic"), Reply.text("Agent: AgentPlanTruncator"))
    d = asyncio.run(teacher(server).adecide(STATE))
    assert (d.agent_id, d.decided_by, d.llm_calls) == (16, "teacher", 2)
    retry_msgs = server.requests[1]["messages"]
    assert retry_msgs[-2] == {"role": "assistant", "content": "Agent: AgentMagic"}
    assert "not an agent name" in retry_msgs[-1]["content"]


def test_unusable_answers_fall_back_and_log(server, caplog):
    server.script(*[Reply.text("hmm, hard to say")] * 3)
    pol = teacher(server, max_attempts=3, fallback_agent_id=1)
    with caplog.at_level(logging.WARNING, logger="rollout.policies.teacher"):
        d = asyncio.run(pol.adecide(STATE))
    assert (d.agent_id, d.decided_by, d.llm_calls) == (1, "fallback", 3) and pol.fallbacks == 1
    assert "attempt 3: no agent name" in d.reason
    assert any("teacher fell back to AgentDeepThinkPDDL" in r.message for r in caplog.records)


def test_endpoint_failure_falls_back(server):
    server.script(Reply.status(500), Reply.status(500))
    d = asyncio.run(teacher(server).adecide(STATE))
    assert d.decided_by == "fallback" and "LLM call failed" in d.reason


def test_dynamic_agent_only_when_enabled(server):
    server.script(Reply.text("DynamicAgent: widen the type of ?x in (at ?x ?l)"))
    d = asyncio.run(teacher(server, allow_dynamic=True).adecide(STATE))
    assert d.agent_id == AgentId.DYNAMIC and d.dynamic_profile.startswith("widen the type")
    assert "DynamicAgent: <task profile>" in server.requests[0]["messages"][0]["content"]


def test_sync_decide_and_rules_first(server):
    server.default = lambda body: Reply.text("Agent: AgentActionReorderer")
    pol = teacher(server)
    assert pol.decide(STATE).agent_id == 14
    assert pol.decide(STATE).agent_id == 14  # a fresh event loop per sync call works
    wrapped = RulesFirst(pol)
    empty = EpisodeState("spec")
    assert asyncio.run(wrapped.adecide(empty)).decided_by == "rule"
    assert len(server.requests) == 2


def test_make_policy_teacher_spec(server, monkeypatch):
    monkeypatch.delenv("HALO_LLM_MODEL", raising=False)
    server.default = lambda body: Reply.text("Agent: 15")
    pol = make_policy(f"rules+teacher:model=t,base_url={server.base_url},fallback=2,attempts=1,dynamic=true")
    d = asyncio.run(pol.adecide(STATE))
    assert (d.agent_id, d.decided_by) == (15, "teacher")
    with pytest.raises(ValueError, match="unknown parameter 'colour'"):
        make_policy(f"teacher:model=t,base_url={server.base_url},colour=red")
    with pytest.raises(ValueError, match="HALO_LLM_MODEL"):
        make_policy(f"teacher:base_url={server.base_url}")

"""One whole episode in real-LLM mode: rules + prompted teacher + LLM agents over the fake endpoint,
with the real planner and validator in the loop."""

from __future__ import annotations

import asyncio

import solvers
from rollout.llm import LLMConfig, OpenAIChatClient, PriceTable
from rollout.loop.episode import EpisodeConfig, run_episode
from rollout.policies.rules import RulesFirst
from rollout.policies.teacher import TeacherPolicy
from rollout.tasks.base import Task
from tests.fake_openai import FakeOpenAI, Reply


def test_rules_teacher_and_llm_agents_reach_a_valid_plan(blocksworld):
    domain, problem = blocksworld
    no_handempty = problem.replace("(handempty)", "")
    task = Task("planbench/blocksworld/instance-2", "planbench", "blocksworld",
                "Four blocks; put block c on block a.", gold_domain=domain, gold_problem=problem)

    def responder(body):
        system = body["messages"][0]["content"]
        if system.startswith("You orchestrate"):
            return Reply.text("Agent: AgentInitialStateSuggester\nReason: nothing can move", prompt_tokens=900,
                              completion_tokens=12)
        if "writing a model from scratch" in system:  # agent 2, chosen by the rules layer (empty domain)
            return Reply.text(f"<domain>{domain}</domain>\n<problem>{no_handempty}</problem>",
                              prompt_tokens=300, completion_tokens=400)
        if "completes initial states" in system:  # agent 20
            return Reply.text(f"Added (handempty).\n<problem>{problem}</problem>", prompt_tokens=800,
                              completion_tokens=200)
        if "explain plans" in system:  # agent 12
            return Reply.text("<instructions>\n1. Lift d off c.\n2. Put d down.\n3. Pick up c.\n"
                              "4. Put c on a.\n</instructions>")
        return Reply.text("unexpected")

    with FakeOpenAI(default=responder) as server:
        prices = PriceTable.from_dict({"models": {"m": {"input": 1.0, "output": 4.0}}})
        client = OpenAIChatClient(LLMConfig(base_url=server.base_url, model="m", timeout_s=5, prices=prices))
        teacher = TeacherPolicy(OpenAIChatClient(LLMConfig(base_url=server.base_url, model="m", timeout_s=5)),
                                model_name="m")
        config = EpisodeConfig(llm_backend="openai:m", sim=None, llm=client, limits=solvers.Limits(timeout_s=20))
        record = asyncio.run(run_episode(task, RulesFirst(teacher), config))

    assert record.error == ""
    trace = [(s.agent_id, s.decided_by) for s in record.steps]
    assert trace == [(2, "rule"), (20, "teacher"), (11, "rule"), (12, "rule")]
    assert record.steps[0].error_category == "unsolvable_proved"
    assert record.success_validator and record.success_oracle
    assert record.natural_language_plan.startswith("1. Lift d off c.")
    assert record.llm_backend == "openai:m"
    # Agents 2, 20 and 12 plus the teacher's own call at step 1: orchestration is not free.
    assert record.total_llm_calls == 4
    assert record.steps[1].llm_calls == 2 and record.steps[1].tokens_in == 900 + 800
    assert len(client.records) == 3 and all(r.status == "ok" for r in client.records)
    assert abs(record.total_cost_usd - sum(r.cost_usd for r in client.records)) < 1e-12
    assert record.steps[0].cost_usd == (300 * 1.0 + 400 * 4.0) / 1e6

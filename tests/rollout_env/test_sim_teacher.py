"""The simulated prompted teacher (`teacher:model=sim`): the real TeacherPolicy on a simulated
chat backend, in real episodes with the real solvers."""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import replace

import pytest

from rollout.core.agent_table import AGENT_TABLE
from rollout.core.state import EpisodeState
from rollout.loop.episode import EpisodeConfig, run_episode
from rollout.policies import PolicySpecError, make_policy
from rollout.policies.teacher import TeacherPolicy, parse_answer, state_prompt, system_prompt
from rollout.sim.faults import CATALOG, Fault
from rollout.sim.teacher_chat import PROFILES, SimTeacherChat, count_tokens, repairing_agent
from rollout.sim.world import SimWorld, SimWorldMissing

DETERMINISTIC_IDS = {a.agent_id for a in AGENT_TABLE if a.kind != "llm"}  # includes NoOp


def _episodes(tasks, spec: str, seeds=(0, 1)):
    policy = make_policy(spec)

    async def go():
        return await asyncio.gather(*[run_episode(t, policy, EpisodeConfig(seed=s, run_id="simteacher"))
                                      for t in tasks for s in seeds])

    return policy, asyncio.run(go())


def test_sim_teacher_episodes_count_and_price_its_own_calls(tasks):
    chosen = list(tasks.values())[:6]
    policy, records = _episodes(chosen, "rules+teacher:model=sim")
    chat = policy.inner.chat
    assert isinstance(chat, SimTeacherChat) and policy.inner.version == "teacher/sim-weaker(gpt-5-mini)"
    assert all(r.llm_backend == "sim" and not r.error for r in records)
    teacher_steps = [s for r in records for s in r.steps if s.decided_by == "teacher"]
    assert teacher_steps, "no decision reached the teacher"
    totals = chat.totals()
    assert totals["calls"] >= len(teacher_steps) and totals["cost_usd"] > 0
    # a deterministic agent makes no LLM call, so such a step's calls are the teacher's alone
    for s in teacher_steps:
        assert s.llm_calls >= 1 and s.cost_usd > 0
        if s.agent_id in DETERMINISTIC_IDS:
            assert s.tokens_in > 500  # the real prompt: system prompt with the agent table + state
    agent_calls = sum(s.llm_calls for r in records for s in r.steps if s.decided_by == "rule") + sum(
        1 for s in teacher_steps if s.agent_id not in DETERMINISTIC_IDS)
    assert sum(r.total_llm_calls for r in records) == agent_calls + totals["calls"]


def _world_with(task, kind: str) -> SimWorld:
    world = SimWorld(task, seed=3)
    params = CATALOG[kind].choose(world.gold_domain, world.gold_problem, world.rng)
    assert params is not None
    world.faults = [Fault(kind, params)]
    return world


@pytest.mark.parametrize("quality", [1.0, 0.0])
def test_confusion_model_answers_the_repairer_with_probability_quality(tasks, quality):
    task = next(t for t in tasks.values() if t.domain_name == "depots")  # typed, so every kind applies
    chat = SimTeacherChat(replace(PROFILES["weaker"], quality=quality, accuracy={}, systematic=0.0, unparsable=0.0))

    async def ask(kind: str, step: int) -> tuple[int, int]:
        world = _world_with(task, kind)  # binds itself as this task's current world
        domain, problem = world.render()
        state = EpisodeState(task.description, domain=domain, problem=problem, step=step,
                             error_category="unsolvable_proved")
        messages = [{"role": "system", "content": system_prompt(False)},
                    {"role": "user", "content": state_prompt(state)}]
        reply = await chat.chat(messages, purpose="teacher", state=state)
        assert reply.tokens_in == sum(count_tokens(m["content"]) + 4 for m in messages)
        return parse_answer(reply.text).agent_id, repairing_agent(world, state)

    kinds = ["missing_init_fact", "broken_type_hierarchy", "hallucinated_predicate", "wrong_argument_type"]
    answers = [asyncio.run(ask(k, step)) for k in kinds for step in range(3)]
    assert all((got == right) == (quality == 1.0) for got, right in answers)
    assert {right for _, right in answers} == {20, 18, 0, 19}


def test_unusable_answers_exhaust_retries_and_fall_back(tasks):
    depots = next(t for t in tasks.values() if t.domain_name == "depots")
    _, records = _episodes([depots], "rules+teacher:model=sim,unparsable=1,attempts=2",
                           seeds=range(4))
    fallbacks = [s for r in records for s in r.steps if s.decided_by == "fallback"]
    assert fallbacks and all(s.agent_id == 1 and s.decision_reason.startswith("fallback to") for s in fallbacks)
    assert all(s.llm_calls >= 2 for s in fallbacks)  # both attempts were paid for


def test_sim_teacher_outside_the_simulated_world_is_an_error(tasks):
    policy = make_policy("teacher:model=sim")
    assert isinstance(policy, TeacherPolicy)
    state = EpisodeState("task", domain="(define (domain d))")
    with pytest.raises(SimWorldMissing, match="simulated agent world"):
        contextvars.Context().run(policy.decide, state)  # no episode: no world in the context
    SimWorld(next(iter(tasks.values())))  # a world of another task, left in this context
    with pytest.raises(SimWorldMissing, match="not the task being decided"):
        policy.decide(state)


@pytest.mark.parametrize("spec,message", [
    ("teacher:model=sim,profile=genius", "unknown sim teacher profile"),
    ("teacher:model=sim,quality=1.5", "quality must be in"),
    ("teacher:model=sim,quality=high", "quality must be a number"),
    ("teacher:model=sim,base_url=http://x", "unknown parameter"),
])
def test_bad_sim_teacher_specs_are_clear_errors(spec, message):
    with pytest.raises(PolicySpecError, match=message):
        make_policy(spec)


def test_token_count_tracks_text_length():
    assert count_tokens("") == 0
    assert count_tokens("(pick-up a)") == 6
    long = state_prompt(EpisodeState("Stack the blocks. " * 50, domain="(define (domain bw))"))
    assert 200 < count_tokens(long) < len(long) // 2


def test_halo_report_runs_the_sim_teacher_with_parameters():
    from typer.testing import CliRunner

    from cluster.cli import app

    result = CliRunner().invoke(app, ["report", "--tasks", "planbench:depots:2", "--policy",
                                      "rules+teacher:model=sim,profile=stronger,rules+random", "--markdown"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| rules+")]
    assert [r.split(" | ")[0] for r in rows] == ["| rules+teacher:model=sim,profile=stronger", "| rules+random"]
    assert all("| sim | 2 |" in r for r in rows)

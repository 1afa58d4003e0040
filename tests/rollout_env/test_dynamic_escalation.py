"""`dyn:SPEC`: escalation to the dynamic agent when the wrapped policy would repeat itself."""

from __future__ import annotations

import asyncio

from rollout.core.agent_table import AgentId
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.loop.episode import EpisodeConfig, run_episode
from rollout.policies import make_policy
from rollout.policies.dynamic_escalation import DynamicEscalation
from rollout.tasks.loaders import load_tasks


class Always(Policy):
    """Picks one agent every time (the degenerate policy a stuck orchestrator behaves like)."""

    decides_inline = True

    def __init__(self, agent: int) -> None:
        self.agent = agent

    def _decide(self, state: EpisodeState) -> Decision:
        return Decision(self.agent, "model", reason="always")


def test_escalates_only_after_two_repeats() -> None:
    policy = DynamicEscalation(Always(0))
    state = EpisodeState(task_description="t", domain="(define (domain d))", history=[0],
                         validator_errors="Precondition of (stack a b) not satisfied")
    assert policy.decide(state).agent_id == 0
    state.history = [9, 0, 0]
    escalated = policy.decide(state)
    assert escalated.agent_id == AgentId.DYNAMIC and escalated.decided_by == "model"
    assert "Precondition of (stack a b)" in escalated.dynamic_profile


def test_episodes_run_with_the_dynamic_agent() -> None:
    task = load_tasks("planbench:blocksworld:3")[0]
    record = asyncio.run(run_episode(task, DynamicEscalation(Always(4)), EpisodeConfig(seed=1)))
    chosen = [s.agent_id for s in record.steps if not s.is_hardcoded]
    assert chosen[:3] == [4, 4, AgentId.DYNAMIC]  # two repeats, then the escalation
    dyn_steps = [s for s in record.steps if s.agent_id == AgentId.DYNAMIC]
    assert dyn_steps and all(s.llm_calls >= 1 for s in dyn_steps)  # the dynamic agent is an LLM call
    assert make_policy("rules+dyn:scripted").name == "rules+dyn+scripted"

"""A throw-away deterministic agent for tests/extensions: the whole of what adding an agent
takes is this file plus one `register_agent(ID, "module:Class")` line.

It writes the task's gold domain and problem back, so the loop plans and validates them with
the real planner and validator and the step's outcome shows that this agent ran.
"""

from __future__ import annotations

from rollout.agents.base import Agent, AgentContext, AgentOutcome
from rollout.core.state import EpisodeState

AGENT_ID = 22  # outside the model's vocabulary (0-20) and the dynamic agent (21)


class AgentGoldRestorer(Agent):
    """Restores the task's gold domain and problem."""

    agent_id = AGENT_ID

    async def apply(self, state: EpisodeState, ctx: AgentContext, *, dynamic_profile: str | None = None
                    ) -> AgentOutcome:
        if not ctx.task.gold_domain or not ctx.task.gold_problem:
            return AgentOutcome(state.domain, state.problem, ok=False, message="the task has no gold PDDL")
        return AgentOutcome(ctx.task.gold_domain, ctx.task.gold_problem, message="restored the gold PDDL")

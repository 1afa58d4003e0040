"""LLM agents 0-10, 12, 18-20, the NoOp agent (11) and the dynamic agent (21).

Each LLM agent is one class, generated from its AGENT_TABLE row. When a stand-in plays the LLM (ctx.stand_in: the
simulated world), it answers; otherwise the real call path (prompts, extraction, client) in rollout.agents.llm_call
does. Neither path raises for bad model output: a failed call is an AgentOutcome with ok=False.
"""

from __future__ import annotations

from rollout.agents.base import Agent, AgentContext, AgentOutcome
from rollout.core.agent_table import AGENT_TABLE, AgentId
from rollout.core.state import EpisodeState


class LLMAgent(Agent):
    """Common path for every LLM agent: a stand-in (the simulated world) or a real chat backend."""

    async def apply(self, state: EpisodeState, ctx: AgentContext, *, dynamic_profile: str | None = None
                    ) -> AgentOutcome:
        if ctx.stand_in is not None:
            outcome = ctx.stand_in.apply_llm_agent(self.agent_id, state, dynamic_profile=dynamic_profile)
            wait = getattr(ctx.stand_in, "wait", None)
            if wait is not None:
                return await wait(outcome, state)
            return outcome
        if ctx.llm is None:
            return AgentOutcome(state.domain, state.problem, ok=False,
                                message=f"{self.name}: no LLM backend and no stand-in configured")
        from rollout.agents.llm_call import run_real_llm_agent

        return await run_real_llm_agent(self.agent_id, state, ctx, dynamic_profile=dynamic_profile)


def _llm_agent(agent_id: int, class_name: str) -> type[LLMAgent]:
    return type(class_name, (LLMAgent,), {"agent_id": agent_id, "__doc__": f"LLM agent {agent_id}.",
                                          "__module__": __name__})


# One class per LLM row of AGENT_TABLE, named as there (rollout.core.agent_table.AGENTS points here).
for _info in AGENT_TABLE:
    if _info.kind == "llm":
        globals()[_info.name] = _llm_agent(_info.agent_id, _info.name)
DynamicAgent = _llm_agent(AgentId.DYNAMIC, "DynamicAgent")


class NoOpAgent(Agent):
    """Terminates the loop when the plan is valid; changes nothing."""

    agent_id = AgentId.NOOP

    async def apply(self, state: EpisodeState, ctx: AgentContext, *, dynamic_profile: str | None = None
                    ) -> AgentOutcome:
        return AgentOutcome(state.domain, state.problem, state.plan, proposed_solution=state.proposed_solution,
                            message="no-op" if state.plan_valid else "no-op on a plan the validator rejects")

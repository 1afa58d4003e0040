"""LLM agents 0-10, 12, 18-20, the NoOp agent (11) and the dynamic agent (21).

Each LLM agent is one registered class. In the simulated world (ctx.sim set) the world plays
the LLM; otherwise the real call path (prompts, extraction, client) in rollout.agents.llm_call
does. Neither path raises for bad model output: a failed call is an AgentOutcome with ok=False.
"""

from __future__ import annotations

from rollout.agent_table import DYNAMIC_AGENT_ID, NOOP_ID
from rollout.agents.base import Agent, AgentContext, AgentOutcome, register
from rollout.state import EpisodeState


class LLMAgent(Agent):
    """Common path for every LLM agent: simulated world or a real chat backend."""

    async def apply(self, state: EpisodeState, ctx: AgentContext, *, dynamic_profile: str | None = None
                    ) -> AgentOutcome:
        if ctx.sim is not None:
            outcome = ctx.sim.apply_llm_agent(self.agent_id, state, dynamic_profile=dynamic_profile)
            wait = getattr(ctx.sim, "wait", None)
            if wait is not None:
                return await wait(outcome, state)
            return outcome
        if ctx.llm is None:
            return AgentOutcome(state.domain, state.problem, ok=False,
                                message=f"{self.name}: no LLM backend and no simulated world configured")
        from rollout.agents.llm_call import run_real_llm_agent

        return await run_real_llm_agent(self.agent_id, state, ctx, dynamic_profile=dynamic_profile)


def _llm_agent(agent_id: int, class_name: str) -> type[LLMAgent]:
    cls = type(class_name, (LLMAgent,), {"agent_id": agent_id, "__doc__": f"LLM agent {agent_id}."})
    register(cls)
    return cls


AgentHallucinations = _llm_agent(0, "AgentHallucinations")
AgentDeepThinkPDDL = _llm_agent(1, "AgentDeepThinkPDDL")
AgentEmergency = _llm_agent(2, "AgentEmergency")
AgentEmergencySolution = _llm_agent(3, "AgentEmergencySolution")
AgentDeepThinkConstraints = _llm_agent(4, "AgentDeepThinkConstraints")
AgentTemporalConsistency = _llm_agent(5, "AgentTemporalConsistency")
AgentEnforceMultiAgency = _llm_agent(6, "AgentEnforceMultiAgency")
AgentFastDownwardsAdapter = _llm_agent(7, "AgentFastDownwardsAdapter")
AgentReduceVariables = _llm_agent(8, "AgentReduceVariables")
AgentSyntaxPDDL = _llm_agent(9, "AgentSyntaxPDDL")
AgentAsynchronicity = _llm_agent(10, "AgentAsynchronicity")
AgentNaturalLanguage = _llm_agent(12, "AgentNaturalLanguage")
AgentTypeHierarchyFixer = _llm_agent(18, "AgentTypeHierarchyFixer")
AgentPredicateGeneralizer = _llm_agent(19, "AgentPredicateGeneralizer")
AgentInitialStateSuggester = _llm_agent(20, "AgentInitialStateSuggester")
DynamicAgent = _llm_agent(DYNAMIC_AGENT_ID, "DynamicAgent")


@register
class NoOpAgent(Agent):
    """Terminates the loop when the plan is valid; changes nothing."""

    agent_id = NOOP_ID

    async def apply(self, state: EpisodeState, ctx: AgentContext, *, dynamic_profile: str | None = None
                    ) -> AgentOutcome:
        return AgentOutcome(state.domain, state.problem, state.plan, proposed_solution=state.proposed_solution,
                            message="no-op" if state.plan_valid else "no-op on a plan the validator rejects")

"""`dyn:SPEC`: a policy that escalates to the dynamic agent (ID 21) when it would repeat itself.

The wrapped policy decides as usual; when it picks the agent it already picked at the last two
steps (the loop is stuck on it), the dynamic agent is created instead, with a task profile
written from the validator's and planner's latest output. A trained policy's vocabulary is
agents 0-20, so this is how it reaches the dynamic agent (an optional action outside those IDs);
the Table-2 ablation compares `rules+dyn:model:DIR` with `rules+model:DIR`."""

from __future__ import annotations

from dataclasses import replace

from rollout.core.agent_table import AgentId
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState

REPEATS = 2  # the agent was chosen at this many consecutive steps before


def dynamic_profile(state: EpisodeState) -> str:
    errors = (state.validator_errors or state.error_category or "no report").strip()[-600:]
    return ("A one-off specialist: read the latest solver and validator output and fix exactly what it reports, "
            f"changing nothing else. Latest report: {errors}")


class DynamicEscalation(Policy):
    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = f"dyn+{inner.name}"
        self.version = inner.version
        self.decides_inline = inner.decides_inline

    def _escalate(self, state: EpisodeState, decision: Decision) -> Decision:
        recent = state.history[-REPEATS:]
        if len(recent) < REPEATS or any(a != decision.agent_id for a in recent):
            return decision
        return replace(decision, agent_id=AgentId.DYNAMIC, dynamic_profile=dynamic_profile(state),
                       reason=f"{decision.reason}; escalated: agent {decision.agent_id} chosen {REPEATS} times already")

    def _decide(self, state: EpisodeState) -> Decision:
        return self._escalate(state, self.inner.decide(state))

    async def adecide(self, state: EpisodeState) -> Decision:
        return self._escalate(state, await self.inner.adecide(state))

    def close(self) -> None:
        self.inner.close()


def dynamic_factory(params: str, seed: int) -> Policy:
    from rollout.policies import PolicySpecError, make_policy

    if not params:
        raise PolicySpecError("dyn needs the policy it wraps: dyn:SPEC (e.g. rules+dyn:model:DIR)")
    return DynamicEscalation(make_policy(params, seed=seed))

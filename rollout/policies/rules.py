"""The rules layer: decisions made without any model. They are marked is_hardcoded and are
excluded from the supervised set."""

from __future__ import annotations

from rollout.core.agent_table import AgentId
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState

_SYNTAX_CATEGORIES = frozenset({"parse_error_domain", "parse_error_problem", "parse_error_plan"})


def is_syntax_error(state: EpisodeState) -> bool:
    """A `[parse.*]` diagnostic in the logs, or a parse-error category without a `[semantic.*]` one.

    The strict check (solvers/pddl_check.py) files type mismatches, undeclared symbols and wrong
    arities under the parse-error categories too, with `[semantic.*]` codes: those are not syntax
    errors, agent 9 does not repair them, so the rule leaves them to the policy."""
    logs = state.validator_errors + state.planner_log
    if "[parse." in logs:
        return True
    return state.error_category in _SYNTAX_CATEGORIES and "[semantic." not in logs


def rule_decision(state: EpisodeState) -> Decision | None:
    if not state.domain.strip():
        return Decision(AgentId.EMERGENCY, "rule", reason="empty domain")
    if state.plan_valid:
        return Decision(AgentId.NOOP, "rule", reason="validator accepted the plan")
    if is_syntax_error(state):
        why = state.error_category or "parse diagnostic"
        return Decision(AgentId.SYNTAX_PDDL, "rule", reason=f"syntax error ({why})")
    return None


class RulesFirst(Policy):
    """Applies the rules layer, then defers to an inner policy."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = f"rules+{inner.name}"
        self.version = inner.version

    def _decide(self, state: EpisodeState) -> Decision:
        return rule_decision(state) or self.inner.decide(state)

    async def adecide(self, state: EpisodeState) -> Decision:
        ruled = rule_decision(state)
        if ruled is not None:
            return ruled
        return await self.inner.adecide(state)

    def close(self) -> None:
        self.inner.close()

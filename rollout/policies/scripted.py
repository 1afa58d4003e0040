"""The scripted baseline: a configurable heuristic over the visible symptoms, with noise.

The state is reduced to one symptom name (error category, validator diagnostic codes, planner
log, history); a rules table maps each symptom to an ordered list of candidate agents. The
policy works down that list while the symptom persists (so a failed guess leads to the next
candidate), and with probability `noise` picks any agent instead.
"""

from __future__ import annotations

import re

from rollout.core.agent_table import AGENT_IDS, AgentId
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.pddl.sections import problem_section_at
from rollout.policies.random import state_rng
from rollout.policies.rules import is_syntax_error

_DIAG = re.compile(r"\[([a-z_]+\.[a-z_]+)\]")
_STEP = re.compile(r"step (\d+) \(([^)]*)\)")
_PROBLEM_MISMATCH = re.compile(r"problem\.pddl:(\d+):(\d+): error: [^\n]*\[semantic\.type_mismatch\]")

# symptom -> candidate agents, tried in this order while the symptom persists
DEFAULT_RULES: dict[str, tuple[AgentId, ...]] = {
    "empty_domain": (AgentId.EMERGENCY,),
    "valid": (AgentId.NOOP,),
    "syntax": (AgentId.SYNTAX_PDDL, AgentId.EMERGENCY),
    "unsupported": (AgentId.FAST_DOWNWARDS_ADAPTER, AgentId.DEEP_THINK_PDDL, AgentId.EMERGENCY),
    "type_error": (AgentId.TYPE_HIERARCHY_FIXER, AgentId.PREDICATE_GENERALIZER, AgentId.DEEP_THINK_PDDL),
    # a goal atom whose arguments do not fit the predicate's types: most likely written the wrong way round
    "goal_type_error": (AgentId.DEEP_THINK_CONSTRAINTS, AgentId.DEEP_THINK_PDDL, AgentId.EMERGENCY),
    "action_type_error": (AgentId.PREDICATE_GENERALIZER, AgentId.DEEP_THINK_PDDL, AgentId.TYPE_HIERARCHY_FIXER),
    "fluent_error": (AgentId.FAST_DOWNWARDS_ADAPTER, AgentId.DEEP_THINK_PDDL),
    "repeated_step": (AgentId.REDUNDANCY_STRIPPER, AgentId.ACTION_REORDERER, AgentId.VARIABLE_SWAPPER),
    "precondition_failed_undeclared_looking": (AgentId.HALLUCINATIONS, AgentId.INITIAL_STATE_SUGGESTER,
                                               AgentId.DEEP_THINK_PDDL),
    "precondition_failed": (AgentId.VARIABLE_SWAPPER, AgentId.ACTION_REORDERER, AgentId.INITIAL_STATE_SUGGESTER,
                            AgentId.SUBPLAN_FILLER, AgentId.DEEP_THINK_PDDL, AgentId.HALLUCINATIONS),
    "goal_not_reached": (AgentId.PLAN_TRUNCATOR, AgentId.SUBPLAN_FILLER, AgentId.DEEP_THINK_CONSTRAINTS,
                         AgentId.DEEP_THINK_PDDL),
    "unsolvable": (AgentId.INITIAL_STATE_SUGGESTER, AgentId.HALLUCINATIONS, AgentId.DEEP_THINK_PDDL,
                   AgentId.DEEP_THINK_CONSTRAINTS, AgentId.EMERGENCY),
    "no_plan": (AgentId.REDUCE_VARIABLES, AgentId.DEEP_THINK_PDDL, AgentId.EMERGENCY_SOLUTION, AgentId.EMERGENCY),
    "crash": (AgentId.DEEP_THINK_PDDL, AgentId.SYNTAX_PDDL, AgentId.EMERGENCY),
    "unknown": (AgentId.DEEP_THINK_PDDL, AgentId.EMERGENCY_SOLUTION, AgentId.EMERGENCY),
}


def diagnostics(state: EpisodeState) -> list[str]:
    return _DIAG.findall(state.validator_errors) + _DIAG.findall(state.planner_log)


def symptom(state: EpisodeState, predicate_names: set[str] | None = None) -> str:
    """Classify the visible state into one symptom name (a key of the rules table)."""
    if not state.domain.strip():
        return "empty_domain"
    if state.plan_valid:
        return "valid"
    codes = diagnostics(state)
    cat = state.error_category
    log = state.planner_log.lower()
    if is_syntax_error(state):
        return "syntax"
    if any("type_mismatch" in c or "type_cycle" in c or "undeclared_type" in c for c in codes):
        if "validate.type_mismatch" in codes:
            return "action_type_error"
        return "goal_type_error" if _mismatch_section(state) == "goal" else "type_error"
    if cat == "unsupported_requirement" or "unsupported" in log or "not supported" in log:
        return "unsupported"
    if any("fluent" in c for c in codes):
        return "fluent_error"
    false_atom = re.search(r"precondition false: \((\S+?)[ )]", state.validator_errors)
    invented = bool(false_atom and _looks_invented(false_atom.group(1), state.domain, state.problem))
    if cat == "unsolvable_proved":
        # the PDDL itself is wrong; the validator's complaint is about an older plan
        return "precondition_failed_undeclared_looking" if invented else "unsolvable"
    if "validate.precondition_failed" in codes:
        step = _STEP.search(state.validator_errors)
        if step and _repeats_previous(state.plan, int(step.group(1))):
            return "repeated_step"
        return "precondition_failed_undeclared_looking" if invented else "precondition_failed"
    if "validate.goal_not_reached" in codes:
        return "goal_not_reached"
    if cat in ("no_plan_found", "search_timeout", "memory_limit"):
        return "no_plan"
    if cat in ("solver_crash", "input_error"):
        return "crash"
    return "unknown"


def _mismatch_section(state: EpisodeState) -> str:
    """The problem section (rollout.pddl.sections.problem_section_at) holding the first type
    mismatch reported in the problem file; "" when none is reported there."""
    found = _PROBLEM_MISMATCH.search(state.validator_errors) or _PROBLEM_MISMATCH.search(state.planner_log)
    if not found:
        return ""
    return problem_section_at(state.problem, int(found.group(1)), int(found.group(2)))


def _repeats_previous(plan: str, step_no: int) -> bool:
    steps = [s.strip().lower() for s in plan.splitlines() if s.strip()]
    return 2 <= step_no <= len(steps) and steps[step_no - 1] == steps[step_no - 2]


def _looks_invented(predicate: str, domain: str, problem: str) -> bool:
    """A precondition predicate that no action adds and no initial fact mentions."""
    pat = f"({predicate}"
    in_init = pat in problem.split(":init", 1)[-1]
    effect_parts = domain.split(":effect")[1:]
    in_effects = any(pat in part.split(":action", 1)[0] for part in effect_parts)
    return not in_init and not in_effects


class ScriptedPolicy(Policy):
    decides_inline = True
    name = "scripted"
    version = "1"

    def __init__(self, noise: float = 0.1, seed: int = 0, rules: dict[str, tuple[int, ...]] | None = None) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        self.noise = noise
        self.seed = seed
        self.rules = {**DEFAULT_RULES, **(rules or {})}
        bad = [a for cands in self.rules.values() for a in cands if a not in AGENT_IDS]
        if bad:
            raise ValueError(f"rules table names unknown agent IDs {sorted(set(bad))}")

    def _decide(self, state: EpisodeState) -> Decision:
        rng = state_rng(self.seed, state, "scripted")
        name = symptom(state)
        if rng.random() < self.noise:
            agent = rng.choice([a for a in AGENT_IDS if a != AgentId.NATURAL_LANGUAGE])
            return Decision(agent, "scripted", reason=f"noise (symptom {name})", policy_version=self.version)
        candidates = self.rules.get(name) or self.rules["unknown"]
        # how many candidates of this list were already tried on the current symptom streak
        tried = 0
        for past in reversed(state.history):
            if past not in candidates:
                break
            tried += 1
        agent = candidates[tried % len(candidates)]
        return Decision(agent, "scripted", reason=f"symptom {name}: candidate {tried % len(candidates) + 1}"
                        f"/{len(candidates)}", policy_version=self.version)

"""The 21 agents' stable IDs. These IDs are the trained model's output vocabulary: never renumber."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AgentKind = Literal["llm", "deterministic", "none"]


@dataclass(frozen=True)
class AgentInfo:
    agent_id: int
    name: str
    kind: AgentKind
    summary: str


AGENT_TABLE: tuple[AgentInfo, ...] = (
    AgentInfo(0, "AgentHallucinations", "llm", "removes predicates, objects or actions the specification does not support"),
    AgentInfo(1, "AgentDeepThinkPDDL", "llm", "cross-checks domain, problem and plan against the specification and fixes inconsistencies"),
    AgentInfo(2, "AgentEmergency", "llm", "cold start / recovery: writes a fresh, solver-compatible domain and problem"),
    AgentInfo(3, "AgentEmergencySolution", "llm", "writes a natural-language solution outline to guide later agents when planning keeps failing"),
    AgentInfo(4, "AgentDeepThinkConstraints", "llm", "checks that every stated constraint is encoded"),
    AgentInfo(5, "AgentTemporalConsistency", "llm", "enforces ordering / temporal coherence, removes bookkeeping shortcuts"),
    AgentInfo(6, "AgentEnforceMultiAgency", "llm", "makes each actor's actions distinct when the task has several actors"),
    AgentInfo(7, "AgentFastDownwardsAdapter", "llm", "rewrites unsupported features (numeric, durative, conditional) into what Fast Downward accepts"),
    AgentInfo(8, "AgentReduceVariables", "llm", "shrinks the initial state without changing the task"),
    AgentInfo(9, "AgentSyntaxPDDL", "llm", "repairs what the parser/validator reports as syntax errors"),
    AgentInfo(10, "AgentAsynchronicity", "llm", "makes independent actions concurrent where the task allows"),
    AgentInfo(11, "NoOpAgent", "none", "terminates: the plan is valid"),
    AgentInfo(12, "AgentNaturalLanguage", "llm", "renders the final plan as instructions for a person"),
    AgentInfo(13, "AgentVariableSwapper", "deterministic", "beam search over argument permutations of plan steps, checked by the validator"),
    AgentInfo(14, "AgentActionReorderer", "deterministic", "circular shifts and dependency-aware swaps of plan steps"),
    AgentInfo(15, "AgentRedundancyStripper", "deterministic", "removes duplicate, undone or useless steps"),
    AgentInfo(16, "AgentPlanTruncator", "deterministic", "cuts the plan at the first prefix that reaches the goal"),
    AgentInfo(17, "AgentSubplanFiller", "deterministic", "asks the planner to fill gaps between valid plan segments"),
    AgentInfo(18, "AgentTypeHierarchyFixer", "llm", "repairs the :types hierarchy"),
    AgentInfo(19, "AgentPredicateGeneralizer", "llm", "widens over-narrow predicate parameter types"),
    AgentInfo(20, "AgentInitialStateSuggester", "llm", "adds initial facts the specification implies but the problem lacks"),
)

NUM_AGENTS = len(AGENT_TABLE)
AGENT_IDS: tuple[int, ...] = tuple(a.agent_id for a in AGENT_TABLE)
AGENT_BY_ID: dict[int, AgentInfo] = {a.agent_id: a for a in AGENT_TABLE}
AGENT_BY_NAME: dict[str, AgentInfo] = {a.name: a for a in AGENT_TABLE}

EMERGENCY_ID = 2
SYNTAX_ID = 9
NOOP_ID = 11
NATURAL_LANGUAGE_ID = 12
# The optional dynamic agent: an extra action outside the model's 0-20 vocabulary.
DYNAMIC_AGENT_ID = 21

assert tuple(range(21)) == AGENT_IDS, "agent IDs must be exactly 0..20"


def agent_name(agent_id: int) -> str:
    if agent_id == DYNAMIC_AGENT_ID:
        return "DynamicAgent"
    return AGENT_BY_ID[agent_id].name

"""The 21 agents' stable IDs and the one registry of agent implementations.

IDs 0-20 are the trained model's output vocabulary: never renumber. AGENTS maps an ID to the
class that implements it, by "module:Class" string, loaded on first use. Table agents are
registered from AGENT_TABLE below (the LLM agent classes are generated from it in
rollout.agents.llm_agents); an agent outside the vocabulary (like the dynamic agent) is one
module with its class plus one `register_agent(ID, "module:Class")` line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from solvers.registry import Registry

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

assert tuple(range(NUM_AGENTS)) == AGENT_IDS and DYNAMIC_AGENT_ID == NUM_AGENTS, \
    "agent IDs must be exactly 0..20, the dynamic agent 21"

# Where each kind of table agent is implemented (the class has the table's name).
_MODULE_OF_KIND: dict[AgentKind, str] = {
    "llm": "rollout.agents.llm_agents",  # generated from AGENT_TABLE
    "deterministic": "rollout.agents.deterministic",
    "none": "rollout.agents.llm_agents",  # the NoOp agent
}

# Agent ID (as text) -> its class (a subclass of rollout.agents.base.Agent).
AGENTS: Registry[type] = Registry("agent")
for _info in AGENT_TABLE:
    AGENTS.register(str(_info.agent_id), f"{_MODULE_OF_KIND[_info.kind]}:{_info.name}", kind=_info.kind)
AGENTS.register(str(DYNAMIC_AGENT_ID), "rollout.agents.llm_agents:DynamicAgent", kind="llm")


def register_agent(agent_id: int, target: type | str, *, kind: AgentKind = "deterministic") -> None:
    """Add an agent outside the model's vocabulary: an ID above DYNAMIC_AGENT_ID, and its class
    or "module:Class". Policies that choose it (search, scripted rules) dispatch to it by ID."""
    if isinstance(agent_id, bool) or not isinstance(agent_id, int) or agent_id <= DYNAMIC_AGENT_ID:
        raise ValueError(f"an added agent needs an integer ID above {DYNAMIC_AGENT_ID} "
                         f"(0-{DYNAMIC_AGENT_ID} are fixed), got {agent_id!r}")
    AGENTS.register(str(agent_id), target, kind=kind)


def unregister_agent(agent_id: int) -> None:
    if agent_id <= DYNAMIC_AGENT_ID:
        raise ValueError(f"agents 0-{DYNAMIC_AGENT_ID} are fixed")
    AGENTS.unregister(str(agent_id))


def agent_class(agent_id: int) -> type:
    """The class registered for `agent_id`; KeyError when there is none."""
    key = str(agent_id)
    if isinstance(agent_id, bool) or not isinstance(agent_id, int) or key not in AGENTS:
        raise KeyError(f"no agent registered with ID {agent_id}")
    return AGENTS.get(key)


def agent_info(agent_id: int) -> AgentInfo:
    """The table row of `agent_id`, or one made from an added agent's class (KeyError if none)."""
    info = AGENT_BY_ID.get(agent_id)
    if info is not None:
        return info
    cls = agent_class(agent_id)
    summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    return AgentInfo(agent_id, cls.__name__, AGENTS.meta(str(agent_id)).get("kind", "deterministic"), summary)


def agent_name(agent_id: int) -> str:
    if agent_id == DYNAMIC_AGENT_ID:
        return "DynamicAgent"
    info = AGENT_BY_ID.get(agent_id)
    return info.name if info is not None else agent_info(agent_id).name

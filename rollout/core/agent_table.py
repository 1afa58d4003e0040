"""The 21 agents' stable IDs and the one registry of agent implementations.

IDs 0-20 are the trained model's output vocabulary: never renumber. Code names an agent by its
`AgentId` member (`AgentId.NOOP`, never 11); an AgentId is an int, so it compares, hashes and
serialises as the integer, and records, JSON and the model's labels carry plain integers (a
step record and `Decision.to_dict` store `int(agent_id)`). AGENTS maps an ID to the
class that implements it, by "module:Class" string, loaded on first use. Table agents are
registered from AGENT_TABLE below (the LLM agent classes are generated from it in
rollout.agents.llm_agents); an agent outside the vocabulary (like the dynamic agent) is one
module with its class plus one `register_agent(ID, "module:Class")` line.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from solvers.registry import Registry

AgentKind = Literal["llm", "deterministic", "none"]


class AgentId(IntEnum):
    """The stable agent IDs: 0-20 the trained model's output vocabulary (AGENT_TABLE's rows, same
    order and names), 21 the optional dynamic agent. An agent added with `register_agent` has a
    plain int ID above 21."""

    HALLUCINATIONS = 0
    DEEP_THINK_PDDL = 1
    EMERGENCY = 2
    EMERGENCY_SOLUTION = 3
    DEEP_THINK_CONSTRAINTS = 4
    TEMPORAL_CONSISTENCY = 5
    ENFORCE_MULTI_AGENCY = 6
    FAST_DOWNWARDS_ADAPTER = 7
    REDUCE_VARIABLES = 8
    SYNTAX_PDDL = 9
    ASYNCHRONICITY = 10
    NOOP = 11
    NATURAL_LANGUAGE = 12
    VARIABLE_SWAPPER = 13
    ACTION_REORDERER = 14
    REDUNDANCY_STRIPPER = 15
    PLAN_TRUNCATOR = 16
    SUBPLAN_FILLER = 17
    TYPE_HIERARCHY_FIXER = 18
    PREDICATE_GENERALIZER = 19
    INITIAL_STATE_SUGGESTER = 20
    DYNAMIC = 21  # outside the model's vocabulary: an LLM agent made per call from a task profile


@dataclass(frozen=True)
class AgentInfo:
    agent_id: int
    name: str
    kind: AgentKind
    summary: str


AGENT_TABLE: tuple[AgentInfo, ...] = (
    AgentInfo(AgentId.HALLUCINATIONS, "AgentHallucinations", "llm", "removes predicates, objects or actions the specification does not support"),
    AgentInfo(AgentId.DEEP_THINK_PDDL, "AgentDeepThinkPDDL", "llm", "cross-checks domain, problem and plan against the specification and fixes inconsistencies"),
    AgentInfo(AgentId.EMERGENCY, "AgentEmergency", "llm", "cold start / recovery: writes a fresh, solver-compatible domain and problem"),
    AgentInfo(AgentId.EMERGENCY_SOLUTION, "AgentEmergencySolution", "llm", "writes a natural-language solution outline to guide later agents when planning keeps failing"),
    AgentInfo(AgentId.DEEP_THINK_CONSTRAINTS, "AgentDeepThinkConstraints", "llm", "checks that every stated constraint is encoded"),
    AgentInfo(AgentId.TEMPORAL_CONSISTENCY, "AgentTemporalConsistency", "llm", "enforces ordering / temporal coherence, removes bookkeeping shortcuts"),
    AgentInfo(AgentId.ENFORCE_MULTI_AGENCY, "AgentEnforceMultiAgency", "llm", "makes each actor's actions distinct when the task has several actors"),
    AgentInfo(AgentId.FAST_DOWNWARDS_ADAPTER, "AgentFastDownwardsAdapter", "llm", "rewrites unsupported features (numeric, durative, conditional) into what Fast Downward accepts"),
    AgentInfo(AgentId.REDUCE_VARIABLES, "AgentReduceVariables", "llm", "shrinks the initial state without changing the task"),
    AgentInfo(AgentId.SYNTAX_PDDL, "AgentSyntaxPDDL", "llm", "repairs what the parser/validator reports as syntax errors"),
    AgentInfo(AgentId.ASYNCHRONICITY, "AgentAsynchronicity", "llm", "makes independent actions concurrent where the task allows"),
    AgentInfo(AgentId.NOOP, "NoOpAgent", "none", "terminates: the plan is valid"),
    AgentInfo(AgentId.NATURAL_LANGUAGE, "AgentNaturalLanguage", "llm", "renders the final plan as instructions for a person"),
    AgentInfo(AgentId.VARIABLE_SWAPPER, "AgentVariableSwapper", "deterministic", "beam search over argument permutations of plan steps, checked by the validator"),
    AgentInfo(AgentId.ACTION_REORDERER, "AgentActionReorderer", "deterministic", "circular shifts and dependency-aware swaps of plan steps"),
    AgentInfo(AgentId.REDUNDANCY_STRIPPER, "AgentRedundancyStripper", "deterministic", "removes duplicate, undone or useless steps"),
    AgentInfo(AgentId.PLAN_TRUNCATOR, "AgentPlanTruncator", "deterministic", "cuts the plan at the first prefix that reaches the goal"),
    AgentInfo(AgentId.SUBPLAN_FILLER, "AgentSubplanFiller", "deterministic", "asks the planner to fill gaps between valid plan segments"),
    AgentInfo(AgentId.TYPE_HIERARCHY_FIXER, "AgentTypeHierarchyFixer", "llm", "repairs the :types hierarchy"),
    AgentInfo(AgentId.PREDICATE_GENERALIZER, "AgentPredicateGeneralizer", "llm", "widens over-narrow predicate parameter types"),
    AgentInfo(AgentId.INITIAL_STATE_SUGGESTER, "AgentInitialStateSuggester", "llm", "adds initial facts the specification implies but the problem lacks"),
)

NUM_AGENTS = len(AGENT_TABLE)
AGENT_IDS: tuple[AgentId, ...] = tuple(AgentId(a.agent_id) for a in AGENT_TABLE)  # the model's vocabulary
AGENT_BY_ID: dict[int, AgentInfo] = {a.agent_id: a for a in AGENT_TABLE}
AGENT_BY_NAME: dict[str, AgentInfo] = {a.name: a for a in AGENT_TABLE}

assert tuple(range(NUM_AGENTS)) == AGENT_IDS and AgentId.DYNAMIC == NUM_AGENTS == len(AgentId) - 1, \
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
AGENTS.register(str(AgentId.DYNAMIC), "rollout.agents.llm_agents:DynamicAgent", kind="llm")


def register_agent(agent_id: int, target: type | str, *, kind: AgentKind = "deterministic") -> None:
    """Add an agent outside the model's vocabulary: an ID above AgentId.DYNAMIC, and its class
    or "module:Class". Policies that choose it (search, scripted rules) dispatch to it by ID."""
    if isinstance(agent_id, bool) or not isinstance(agent_id, int) or agent_id <= AgentId.DYNAMIC:
        raise ValueError(f"an added agent needs an integer ID above {AgentId.DYNAMIC} "
                         f"(0-{AgentId.DYNAMIC} are fixed), got {agent_id!r}")
    AGENTS.register(str(agent_id), target, kind=kind)


def unregister_agent(agent_id: int) -> None:
    if agent_id <= AgentId.DYNAMIC:
        raise ValueError(f"agents 0-{AgentId.DYNAMIC} are fixed")
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
    if agent_id == AgentId.DYNAMIC:
        return "DynamicAgent"
    info = AGENT_BY_ID.get(agent_id)
    return info.name if info is not None else agent_info(agent_id).name

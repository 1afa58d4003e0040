"""Prompts of the LLM agents (0-10, 12, 18-20) and of the dynamic agent.

Every prompt states the agent's role, what the target solver accepts and the exact reply format
(`<domain>`/`<problem>` tags; agent 3 `<solution>`, agent 12 `<instructions>`).
`build_messages(agent_id, state, task)` returns the chat messages for one agent call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rollout.core.agent_table import AgentId, agent_name
from rollout.core.state import EpisodeState
from rollout.tasks.base import Task

OutputKind = Literal["pddl", "solution", "instructions"]

# Per-section character caps for the user message; logs keep their tail, the rest their head.
_CAPS = {"spec": 12000, "spec_json": 6000, "domain": 16000, "problem": 16000, "plan": 6000,
         "validator": 3000, "planner": 2000, "solution": 4000}


@dataclass(frozen=True)
class AgentPrompt:
    role: str
    instructions: str
    output: OutputKind = "pddl"
    # Artefacts the reply must contain; an artefact not listed may be omitted and is then kept.
    required: tuple[str, ...] = ("domain", "problem")


FD_REQUIREMENTS = (
    "The planner is Fast Downward (classical planning). It accepts: :strips, :typing, :equality, "
    ":negative-preconditions, :disjunctive-preconditions, :existential-preconditions, "
    ":universal-preconditions, :conditional-effects (when, forall in effects), :derived-predicates, "
    "and :action-costs limited to (increase (total-cost) <non-negative amount>) with "
    "(:metric minimize (total-cost)). It does NOT accept numeric fluents other than total-cost, "
    ":durative-actions, timed initial literals, :preferences or :constraints. Declare every "
    "requirement you use in :requirements."
)

TEMPORAL_REQUIREMENTS = (
    "The planner is a temporal planner. It accepts :strips, :typing, :negative-preconditions and "
    ":durative-actions with a fixed (= ?duration <number>) duration, conditions under (at start ...), "
    "(over all ...), (at end ...) and effects under (at start ...) or (at end ...). Avoid continuous "
    "effects, timed initial literals and numeric fluents other than durations. Declare every "
    "requirement you use in :requirements."
)

PDDL_FORMAT = (
    "Reply format: put the complete domain between <domain> and </domain> and the complete problem "
    "between <problem> and </problem>. Each holds exactly one (define ...) form in plain PDDL, "
    "without markdown fences or comments that explain your reasoning. Give whole files, never a "
    "diff or a fragment. At most three short sentences of explanation may come before the tags; "
    "nothing after them."
)


def _format_for(required: tuple[str, ...]) -> str:
    if required == ("domain", "problem"):
        return PDDL_FORMAT
    only = required[0]
    other = "problem" if only == "domain" else "domain"
    return (PDDL_FORMAT + f" You must return the {only}. Return the {other} too if you changed it; "
            f"if you leave it out, the current {other} is kept unchanged.")


PROMPTS: dict[int, AgentPrompt] = {
    0: AgentPrompt(
        "You are a PDDL auditor who removes invented content.",
        "Compare the domain and problem with the task specification. Delete every predicate, type, "
        "object, constant, action, precondition or effect that the specification gives no reason for, "
        "and every initial fact or goal that refers to something that does not exist in the task. Keep "
        "everything the specification needs; do not add new modelling beyond fixing references left "
        "dangling by a deletion."),
    1: AgentPrompt(
        "You are a careful PDDL modeller performing a full consistency review.",
        "Read the specification, then the domain, the problem, the current plan and the validator and "
        "planner output. Check that every action's preconditions and effects match the rules in the "
        "specification, that the problem's objects, initial state and goal describe the specified "
        "situation, and that the failure reported by the tools is explained. Fix every inconsistency "
        "you find, keeping names stable where they are correct."),
    2: AgentPrompt(
        "You are a PDDL modeller writing a model from scratch.",
        "Ignore any broken attempt below except as a hint. Write a fresh, minimal domain and problem "
        "that capture the task specification: choose clear type, predicate and action names, encode "
        "every rule as preconditions and effects, list all objects, the full initial state and the "
        "goal. Prefer the simplest encoding the planner handles well."),
    3: AgentPrompt(
        "You are a planning expert who solves the task by reasoning, without PDDL.",
        "Planning has failed repeatedly. Work out a step-by-step solution of the task in natural "
        "language: the order of the main moves, which objects each move uses, and any ordering "
        "constraints that a model must respect. This outline will guide the agents that repair the PDDL.",
        output="solution", required=()),
    4: AgentPrompt(
        "You are a PDDL modeller who audits constraints.",
        "List for yourself every constraint in the specification: capacities, exclusions, required "
        "orderings, resources that are consumed, things that must or must not hold at the end. For each "
        "one, check that the domain or problem enforces it (a precondition, an effect, a goal or an "
        "initial fact). Add what is missing and correct what is encoded wrongly."),
    5: AgentPrompt(
        "You are a PDDL modeller responsible for the order in which things can happen.",
        "Make sure actions can only happen in an order the specification allows: every effect that a "
        "later action relies on must be produced by an earlier action, state changes must be undone "
        "when the world changes back, and there must be no bookkeeping shortcut (a predicate that "
        "lets an action skip the steps that should make it possible). Repair preconditions and "
        "effects so that the plan's time line is coherent."),
    6: AgentPrompt(
        "You are a PDDL modeller for tasks with several actors.",
        "When the specification has several agents, vehicles or workers, each actor must be an "
        "explicit parameter of the actions it performs, its own state (position, load, availability) "
        "must be tracked separately, and one actor's action must not change another's state unless "
        "the specification says so. Make these distinctions explicit in the domain and problem."),
    7: AgentPrompt(
        "You are a PDDL engineer who ports models to Fast Downward.",
        "Rewrite every feature Fast Downward rejects into an equivalent it accepts: durative actions "
        "become instantaneous actions (split start/end if the order matters), numeric fluents become "
        "finite sets of objects and predicates (e.g. counting with successor facts), and remove "
        "requirements that are not used. Keep the task's meaning and the goal unchanged."),
    8: AgentPrompt(
        "You are a PDDL engineer who makes problems smaller for the planner.",
        "Remove objects and initial facts that cannot matter for reaching the goal, merge objects "
        "that play identical roles only when that does not change the answer, and drop static "
        "facts no action ever reads. The goal and every fact the solution needs must stay.",
        required=("problem",)),
    9: AgentPrompt(
        "You are a PDDL syntax fixer.",
        "The parser or validator reported syntax errors (see the tool output). Fix them: balance "
        "parentheses, declare every predicate, type, constant and requirement that is used, use "
        "variables with a leading '?', match predicate arities, and make the problem's :domain name "
        "equal the domain's name. Change nothing beyond what is needed to make the files parse."),
    10: AgentPrompt(
        "You are a PDDL modeller who allows independent work to proceed in parallel.",
        "Find actions that the model forces into a single sequence although the specification lets "
        "different actors or resources act independently (for instance a global lock predicate or a "
        "shared turn token). Loosen those couplings so that independent actions do not block each "
        "other, while keeping every real conflict encoded."),
    12: AgentPrompt(
        "You explain plans to people.",
        "The plan below has been validated. Rewrite it as numbered instructions a person can follow: "
        "one instruction per plan step, in the task's own words (not PDDL names), mentioning the "
        "objects involved. Add nothing that is not in the plan.",
        output="instructions", required=()),
    18: AgentPrompt(
        "You are a PDDL modeller who repairs type hierarchies.",
        "Check the :types section: every type used by a parameter, constant or object must be "
        "declared, each type must have one parent, there must be no cycle, and subtype relations "
        "must follow the specification (e.g. a truck is a vehicle). Fix the hierarchy and the type "
        "annotations of objects, constants and parameters that depend on it.",
        required=("domain",)),
    19: AgentPrompt(
        "You are a PDDL modeller who fixes predicate signatures.",
        "Some predicates or action parameters are typed too narrowly, so facts or plan steps the "
        "task needs cannot be expressed. Widen the parameter types of such predicates and actions to "
        "the most specific common supertype that admits every use in the specification, and keep "
        "the rest of the model unchanged.",
        required=("domain",)),
    20: AgentPrompt(
        "You are a PDDL modeller who completes initial states.",
        "The problem's :init is likely missing facts the specification states or clearly implies "
        "(positions, connections, static properties, 'empty'/'free' facts). Add them, and check that "
        "every object mentioned in the goal has a described starting situation. Do not change the goal.",
        required=("problem",)),
}

DYNAMIC_PROMPT = AgentPrompt(
    "You are a specialised PDDL repair agent. Your task profile was written by the orchestrator "
    "for this situation.",
    "")


def prompt_for(agent_id: int) -> AgentPrompt:
    if agent_id == AgentId.DYNAMIC:
        return DYNAMIC_PROMPT
    if agent_id not in PROMPTS:
        raise KeyError(f"agent {agent_id} is not an LLM agent")
    return PROMPTS[agent_id]


def system_prompt(agent_id: int, target_planner: str, dynamic_profile: str | None = None) -> str:
    spec = prompt_for(agent_id)
    parts = [spec.role]
    if agent_id == AgentId.DYNAMIC:
        parts.append("Task profile: " + (dynamic_profile or "repair whatever the tool output shows is wrong.").strip())
    else:
        parts.append(spec.instructions)
    if spec.output == "solution":
        parts.append("Reply format: put the outline between <solution> and </solution>, as numbered "
                     "steps. Nothing after the closing tag.")
    elif spec.output == "instructions":
        parts.append("Reply format: put the instructions between <instructions> and </instructions>, "
                     "one numbered line per step. Nothing after the closing tag.")
    else:
        parts.append(TEMPORAL_REQUIREMENTS if target_planner == "temporal" else FD_REQUIREMENTS)
        parts.append(_format_for(spec.required))
    return "\n\n".join(parts)


def _head(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[:cap] + "\n... (truncated)"


def _tail(text: str, cap: int) -> str:
    return text if len(text) <= cap else "(truncated) ...\n" + text[-cap:]


def user_prompt(state: EpisodeState, task: Task | None = None, *, agent_id: int | None = None) -> str:
    description = state.task_description or (task.description if task else "")
    spec_json = state.spec_json or (task.spec_json if task else None)
    sections = [("Task specification", _head(description, _CAPS["spec"]))]
    if spec_json:
        sections.append(("Structured specification (JSON)", _head(spec_json, _CAPS["spec_json"])))
    sections += [
        ("Current domain", _head(state.domain, _CAPS["domain"]) or "(none yet)"),
        ("Current problem", _head(state.problem, _CAPS["problem"]) or "(none yet)"),
        ("Current plan", _head(state.plan, _CAPS["plan"]) or "(no plan)"),
    ]
    verdict = "valid" if state.plan_valid else ("found but invalid" if state.plan_found else "not found")
    status = f"plan {verdict}; last error category: {state.error_category or 'none'}"
    sections.append(("Tool status", status))
    if state.validator_errors:
        sections.append(("Validator output", _tail(state.validator_errors, _CAPS["validator"])))
    if state.planner_log:
        sections.append(("Planner log (end)", _tail(state.planner_log, _CAPS["planner"])))
    if state.proposed_solution and agent_id != AgentId.EMERGENCY_SOLUTION:
        sections.append(("Solution outline from an earlier step", _head(state.proposed_solution, _CAPS["solution"])))
    if state.history:
        sections.append(("Agents already applied (oldest first)", ", ".join(agent_name(a) for a in state.history)))
    return "\n\n".join(f"## {title}\n{body}" for title, body in sections)


def build_messages(agent_id: int, state: EpisodeState, task: Task | None = None,
                   dynamic_profile: str | None = None) -> list[dict[str, str]]:
    target = task.target_planner if task is not None else state.target_planner
    return [
        {"role": "system", "content": system_prompt(agent_id, target, dynamic_profile)},
        {"role": "user", "content": user_prompt(state, task, agent_id=agent_id)},
    ]

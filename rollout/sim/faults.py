"""The fault catalog of the simulated agent world.

Each fault class corrupts gold PDDL (or a drafted plan) the way a drafting LLM plausibly would,
and names the agent(s) that repair it. The symptoms are NOT declared here: they are whatever
the real planner and validator say about the corrupted text (tests/rollout_env checks each
class produces the expected kind of symptom). PDDL faults are applied to parsed S-expressions
at render time, so several can be active at once and any one can be removed again.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rollout.core.agent_table import AgentId
from rollout.pddl.printer import join_sections, to_text
from rollout.pddl.sections import section, sections, typed_list
from rollout.pddl.sexpr import SExpr, copy_tree

Define = list[SExpr]


@dataclass
class Fault:
    """One injected fault: its class and the parameters chosen when it was injected."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FaultClass:
    kind: str
    target: str  # "domain" | "problem" | "text" | "plan"
    repaired_by: tuple[AgentId, ...]  # primary repairer first
    description: str
    # (domain, problem, rng) -> params, or None when the class does not apply to this task
    choose: Callable[[Define, Define, random.Random], dict[str, Any] | None]
    # PDDL faults: (domain, problem, params) -> None, edits in place; text faults edit text
    apply: Callable[..., Any]


# ---------------------------------------------------------------- helpers

def _actions(domain: Define) -> list[list[SExpr]]:
    return sections(domain, ":action") + sections(domain, ":durative-action")


def _field(action: list[SExpr], key: str) -> SExpr | None:
    for i in range(2, len(action) - 1):
        if action[i] == key:
            return action[i + 1]
    return None


def _set_field(action: list[SExpr], key: str, value: SExpr) -> None:
    for i in range(2, len(action) - 1):
        if action[i] == key:
            action[i + 1] = value
            return
    action.extend([key, value])


def _conj(expr: SExpr | None) -> list[SExpr]:
    if expr is None or expr == []:
        return []
    if isinstance(expr, list) and expr and expr[0] == "and":
        return list(expr[1:])
    return [expr]


def _action_by_name(domain: Define, name: str) -> list[SExpr] | None:
    for a in _actions(domain):
        if isinstance(a[1], str) and a[1].lower() == name:
            return a
    return None


def _requirements(domain: Define) -> list[SExpr]:
    req = section(domain, ":requirements")
    if req is None:
        req = [":requirements", ":strips"]
        domain.insert(2, req)
    return req


# ---------------------------------------------------------------- domain/problem faults

def _choose_hallucinated(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    acts = [a for a in _actions(domain) if not any(x == ":duration" for x in a)]
    if not acts:
        return None
    name = rng.choice(["arm-ready", "is-operational", "path-open", "ready", "powered", "authorised"])
    return {"action": str(acts[rng.randrange(len(acts))][1]).lower(), "predicate": name}


def _apply_hallucinated(domain: Define, problem: Define, p: dict[str, Any]) -> None:
    preds = section(domain, ":predicates")
    if preds is not None and [p["predicate"]] not in preds:
        preds.append([p["predicate"]])
    action = _action_by_name(domain, p["action"])
    if action is not None:
        _set_field(action, ":precondition", ["and", *_conj(_field(action, ":precondition")), [p["predicate"]]])


def _choose_missing_init(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    init = section(problem, ":init")
    goal = section(problem, ":goal")
    # facts that also appear in the goal are kept: dropping them rarely breaks anything
    goal_atoms = {repr(a) for a in _conj(goal[1] if goal and len(goal) > 1 else None)}
    candidates = [a for a in (init or [])[1:]
                  if isinstance(a, list) and a and a[0] != "=" and repr(a) not in goal_atoms]
    if not candidates:
        return None
    return {"fact": rng.choice(candidates)}


def _apply_missing_init(domain: Define, problem: Define, p: dict[str, Any]) -> None:
    init = section(problem, ":init")
    if init is not None and p["fact"] in init:
        init.remove(p["fact"])


def _choose_wrong_goal(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    goal = section(problem, ":goal")
    atoms = _conj(goal[1] if goal and len(goal) > 1 else None)
    swappable = [i for i, a in enumerate(atoms) if isinstance(a, list) and len(a) >= 3 and a[1] != a[2]]
    if not swappable:
        return None
    return {"index": rng.choice(swappable)}


def _apply_wrong_goal(domain: Define, problem: Define, p: dict[str, Any]) -> None:
    goal = section(problem, ":goal")
    if goal is None or len(goal) < 2:
        return
    atoms = _conj(goal[1])
    if p["index"] >= len(atoms):
        return
    atom = list(atoms[p["index"]])
    atom[1], atom[2] = atom[2], atom[1]
    atoms[p["index"]] = atom
    goal[1] = ["and", *atoms]


def _choose_unsupported(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    acts = [a for a in _actions(domain) if not any(x == ":duration" for x in a)]
    if not acts or section(domain, ":functions") is not None:
        return None
    return {"action": str(rng.choice(acts)[1]).lower(), "fluent": rng.choice(["energy", "fuel-level", "battery"])}


def _apply_unsupported(domain: Define, problem: Define, p: dict[str, Any]) -> None:
    req = _requirements(domain)
    if ":numeric-fluents" not in req:
        req.append(":numeric-fluents")
    preds = section(domain, ":predicates")
    at = domain.index(preds) + 1 if preds is not None else len(domain)
    if section(domain, ":functions") is None:
        domain.insert(at, [":functions", [p["fluent"]]])
    action = _action_by_name(domain, p["action"])
    if action is not None:
        _set_field(action, ":effect", ["and", *_conj(_field(action, ":effect")), ["decrease", [p["fluent"]], "1"]])
    init = section(problem, ":init")
    if init is not None:
        init.append(["=", [p["fluent"]], "1000"])


def _choose_type_hierarchy(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    types = section(domain, ":types")
    if not types:
        return None
    parents = [t for _, t in typed_list(types[1:]) if t != "object"]
    if not parents:
        return None
    return {"parent": rng.choice(sorted(set(parents)))}


def _apply_type_hierarchy(domain: Define, problem: Define, p: dict[str, Any]) -> None:
    """Drop the '- parent' of every type declared under `parent`: they become plain objects."""
    types = section(domain, ":types")
    if types is None:
        return
    out: list[SExpr] = [types[0]]
    items = types[1:]
    i = 0
    while i < len(items):
        if items[i] == "-" and i + 1 < len(items) and items[i + 1] == p["parent"]:
            i += 2
            continue
        out.append(items[i])
        i += 1
    types[:] = out


def _choose_narrow_predicate(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    types = section(domain, ":types")
    preds = section(domain, ":predicates")
    if not types or not preds:
        return None
    children: dict[str, list[str]] = {}
    for child, parent in typed_list(types[1:]):
        children.setdefault(parent, []).append(child)
    options = []
    for pred in preds[1:]:
        if not isinstance(pred, list):
            continue
        for idx, (_, typ) in enumerate(typed_list(pred[1:])):
            for sub in children.get(typ, []):
                options.append({"predicate": pred[0], "arg": idx, "narrow_to": sub})
    return rng.choice(options) if options else None


def _apply_narrow_predicate(domain: Define, problem: Define, p: dict[str, Any]) -> None:
    preds = section(domain, ":predicates")
    for pred in (preds or [])[1:]:
        if isinstance(pred, list) and pred and pred[0] == p["predicate"]:
            pairs = typed_list(pred[1:])
            if p["arg"] < len(pairs):
                pairs[p["arg"]] = (pairs[p["arg"]][0], p["narrow_to"])
                pred[1:] = [tok for v, t in pairs for tok in (v, "-", t)]
            return


def _choose_narrow_param(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    types = section(domain, ":types")
    if not types:
        return None
    children: dict[str, list[str]] = {}
    for child, parent in typed_list(types[1:]):
        children.setdefault(parent, []).append(child)
    options = []
    for action in _actions(domain):
        params = _field(action, ":parameters")
        for idx, (_, typ) in enumerate(typed_list(params if isinstance(params, list) else [])):
            for sub in children.get(typ, []):
                options.append({"action": str(action[1]).lower(), "arg": idx, "narrow_to": sub})
    return rng.choice(options) if options else None


def _apply_narrow_param(domain: Define, problem: Define, p: dict[str, Any]) -> None:
    action = _action_by_name(domain, p["action"])
    if action is None:
        return
    params = _field(action, ":parameters")
    pairs = typed_list(params if isinstance(params, list) else [])
    if p["arg"] < len(pairs):
        pairs[p["arg"]] = (pairs[p["arg"]][0], p["narrow_to"])
        _set_field(action, ":parameters", [tok for v, t in pairs for tok in (v, "-", t)])


def _choose_missing_delete(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    options = []
    for action in _actions(domain):
        if any(x == ":duration" for x in action):
            continue
        for eff in _conj(_field(action, ":effect")):
            if isinstance(eff, list) and eff and eff[0] == "not":
                options.append({"action": str(action[1]).lower(), "effect": eff})
    return rng.choice(options) if options else None


def _apply_missing_delete(domain: Define, problem: Define, p: dict[str, Any]) -> None:
    action = _action_by_name(domain, p["action"])
    if action is None:
        return
    effects = [e for e in _conj(_field(action, ":effect")) if e != p["effect"]]
    _set_field(action, ":effect", ["and", *effects])


# ---------------------------------------------------------------- text faults (applied last)

def _choose_syntax(domain: Define, problem: Define, rng: random.Random) -> dict[str, Any] | None:
    return {"style": rng.choice(["drop_paren", "bad_keyword"]), "where": rng.random()}


def _break_text(text: str, p: dict[str, Any]) -> str:
    if p["style"] == "bad_keyword":
        for good, bad in ((":precondition", ":precondtion"), (":init", ":inital"), (":effect", ":efect"),
                          (":goal", ":gaol")):
            if good in text:
                return text.replace(good, bad, 1)
    closes = [i for i, ch in enumerate(text) if ch == ")"]
    if not closes:
        return text + "("
    cut = closes[int(p["where"] * len(closes)) % len(closes)]
    return text[:cut] + text[cut + 1:]


# ---------------------------------------------------------------- plan faults (the drafted plan)

def corrupt_plan(steps: list[str], kind: str, rng: random.Random) -> list[str] | None:
    """Return a corrupted copy of a plan (one '(action args)' per item), or None if not applicable."""
    steps = list(steps)
    n = len(steps)
    if kind == "swapped_args":
        idx = [i for i, s in enumerate(steps) if len(s.strip("()").split()) >= 3]
        if not idx:
            return None
        i = rng.choice(idx)
        name, a, b, *rest = steps[i].strip("()").split()
        steps[i] = "(" + " ".join([name, b, a, *rest]) + ")"
        return steps
    if kind == "misordered_steps":
        if n < 2:
            return None
        i = rng.randrange(n - 1)
        steps[i], steps[i + 1] = steps[i + 1], steps[i]
        return steps
    if kind == "duplicated_step":
        if n < 1:
            return None
        i = rng.randrange(n)
        steps.insert(i + 1, steps[i])
        return steps
    if kind == "missing_steps":
        if n < 2:
            return None
        i = rng.randrange(n - 1)
        del steps[i:i + min(2, n - 1 - i) or 1]
        return steps
    if kind == "trailing_steps":
        if n < 1:
            return None
        # undo the last step and its predecessor: the goal no longer holds at the end
        return steps + [s for s in _undo(steps[-2:])]
    raise KeyError(kind)


def _undo(tail: list[str]) -> list[str]:
    inverse = {"stack": "unstack", "unstack": "stack", "pick-up": "put-down", "put-down": "pick-up",
               "load-truck": "unload-truck", "unload-truck": "load-truck",
               "load-airplane": "unload-airplane", "unload-airplane": "load-airplane",
               "overcome": "feast", "feast": "overcome", "attack": "succumb", "succumb": "attack",
               "lift": "drop", "drop": "lift", "load": "unload", "unload": "load"}
    out = []
    for step in reversed(tail):
        name, *args = step.strip("()").split()
        inv = inverse.get(name.lower())
        out.append("(" + " ".join([inv, *args]) + ")" if inv else step)
    return out


def _no_pddl(*_: Any) -> None:
    return None


CATALOG: dict[str, FaultClass] = {fc.kind: fc for fc in (
    FaultClass("syntax_domain", "text", (AgentId.SYNTAX_PDDL,),
               "unbalanced parenthesis or misspelt keyword in the domain", _choose_syntax, _break_text),
    FaultClass("syntax_problem", "text", (AgentId.SYNTAX_PDDL,),
               "unbalanced parenthesis or misspelt keyword in the problem", _choose_syntax, _break_text),
    FaultClass("unsupported_requirement", "domain", (AgentId.FAST_DOWNWARDS_ADAPTER,),
               "numeric fluent Fast Downward cannot handle", _choose_unsupported, _apply_unsupported),
    FaultClass("hallucinated_predicate", "domain", (AgentId.HALLUCINATIONS, AgentId.DEEP_THINK_PDDL),
               "precondition on a predicate nothing establishes", _choose_hallucinated, _apply_hallucinated),
    FaultClass("missing_init_fact", "problem", (AgentId.INITIAL_STATE_SUGGESTER, AgentId.DEEP_THINK_PDDL),
               "an initial fact the statement implies is missing", _choose_missing_init, _apply_missing_init),
    FaultClass("wrong_goal", "problem", (AgentId.DEEP_THINK_CONSTRAINTS, AgentId.DEEP_THINK_PDDL),
               "a goal atom with its arguments the wrong way round", _choose_wrong_goal, _apply_wrong_goal),
    FaultClass("broken_type_hierarchy", "domain", (AgentId.TYPE_HIERARCHY_FIXER,),
               "subtypes lost their parent type", _choose_type_hierarchy, _apply_type_hierarchy),
    FaultClass("narrow_predicate_type", "domain", (AgentId.PREDICATE_GENERALIZER, AgentId.TYPE_HIERARCHY_FIXER),
               "a predicate parameter typed too narrowly", _choose_narrow_predicate, _apply_narrow_predicate),
    FaultClass("wrong_argument_type", "domain", (AgentId.PREDICATE_GENERALIZER, AgentId.DEEP_THINK_PDDL),
               "an action parameter typed too narrowly", _choose_narrow_param, _apply_narrow_param),
    FaultClass("missing_delete_effect", "domain", (AgentId.TEMPORAL_CONSISTENCY, AgentId.DEEP_THINK_PDDL),
               "a bookkeeping shortcut: a delete effect is missing", _choose_missing_delete, _apply_missing_delete),
    FaultClass("swapped_args", "plan", (AgentId.VARIABLE_SWAPPER,), "two arguments of a plan step swapped",
               _no_pddl, _no_pddl),
    FaultClass("misordered_steps", "plan", (AgentId.ACTION_REORDERER,), "two adjacent plan steps swapped",
               _no_pddl, _no_pddl),
    FaultClass("duplicated_step", "plan", (AgentId.REDUNDANCY_STRIPPER,), "a plan step repeated", _no_pddl, _no_pddl),
    FaultClass("missing_steps", "plan", (AgentId.SUBPLAN_FILLER,), "steps missing from the middle of the plan",
               _no_pddl, _no_pddl),
    FaultClass("trailing_steps", "plan", (AgentId.PLAN_TRUNCATOR,), "steps after the goal that undo it",
               _no_pddl, _no_pddl),
)}

PDDL_FAULTS = tuple(k for k, fc in CATALOG.items() if fc.target != "plan")
PLAN_FAULTS = tuple(k for k, fc in CATALOG.items() if fc.target == "plan")


def render(gold_domain: Define, gold_problem: Define, faults: list[Fault],
           rename: dict[str, str] | None = None) -> tuple[str, str]:
    """Gold PDDL with the active faults applied (semantic first, renames, then text breakage)."""
    edits = [fault for fault in faults if CATALOG[fault.kind].target in ("domain", "problem")]
    domain, problem = (copy_tree(gold_domain), copy_tree(gold_problem)) if edits else (gold_domain, gold_problem)
    for fault in edits:
        CATALOG[fault.kind].apply(domain, problem, fault.params)
    d_text, p_text = _print(domain, gold_domain, rename) + "\n", _print(problem, gold_problem, rename) + "\n"
    for fault in faults:
        if fault.kind == "syntax_domain":
            d_text = _break_text(d_text, fault.params)
        elif fault.kind == "syntax_problem":
            p_text = _break_text(p_text, fault.params)
    return d_text, p_text


RenameKey = tuple[tuple[str, str], ...]
# (id of a gold section, rename) -> (that section, its printed text). The entry holds the section
# itself, so the id cannot be reused by another list while the entry exists.
_SECTION_TEXT: dict[tuple[int, RenameKey], tuple[list[SExpr], str]] = {}
_SECTION_TEXT_MAX = 4096


def _print(edited: Define, gold: Define, rename: dict[str, str] | None) -> str:
    """`to_text` of the renamed `edited` define. Faults change few sections, so the sections still
    equal to gold's reuse their printed text (gold trees are shared and never edited)."""
    table = rename or {}
    if len(edited) < 2 or not isinstance(edited[0], str) or any(isinstance(x, str) for x in edited[1:]):
        return to_text(_rename(edited, table) if table else edited)
    key = tuple(sorted(table.items()))
    texts: list[str] = []
    j = 1  # the gold section expected next (an inserted section leaves it in place)
    for item in edited[1:]:
        if j < len(gold) and item == gold[j]:
            texts.append(_gold_section_text(gold[j], table, key))
            j += 1
        else:
            texts.append(to_text(_rename(item, table) if table else item, 2))
            if len(edited) == len(gold):
                j += 1  # same shape: this section was edited in place
    return join_sections(str(_rename(edited[0], table)), texts)


def _gold_section_text(gold_section: list[SExpr], table: dict[str, str], key: RenameKey) -> str:
    cache_key = (id(gold_section), key)
    hit = _SECTION_TEXT.get(cache_key)
    if hit is not None and hit[0] is gold_section:
        return hit[1]
    text = to_text(_rename(gold_section, table) if table else gold_section, 2)
    if len(_SECTION_TEXT) >= _SECTION_TEXT_MAX:
        _SECTION_TEXT.pop(next(iter(_SECTION_TEXT)))
    _SECTION_TEXT[cache_key] = (gold_section, text)
    return text


def _rename(expr: SExpr, table: dict[str, str]) -> SExpr:
    if isinstance(expr, str):
        return table.get(expr.lower(), expr)
    return [_rename(e, table) for e in expr]

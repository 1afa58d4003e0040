"""Hashed sparse features of an EpisodeState for the fast (linear) policy.

The features are the state's symptoms as an orchestrator reads them: the error category and
plan flags, diagnostic codes such as [validate.precondition_failed], words and word pairs of
the validator errors and planner log tail, domain features the target planner may reject,
and the recent agent history (last agent, last pair, which agents were tried), and a static read
of the PDDL (is a precondition's predicate established by nothing: no initial fact, no add
effect?). Numbers and object names are stripped from the text so the features generalise
across tasks.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Iterable

from rollout.core.state import EpisodeState
from rollout.pddl.sections import problem_section_at, section, sections, typed_list
from rollout.pddl.sexpr import SExprError, parse_shared
from solvers.errors import InputError
from train.cost_budget import OverBudget, check_budget, time_budget
from train.reachability import goal_reachability

FEATURE_VERSION = "halo-feat-4"
# The feature sets a fast-policy artifact may name: halo-feat-3 is halo-feat-4 without the type
# consistency read (_type_features); an artifact is scored with the set it was trained on.
FEATURE_VERSIONS = ("halo-feat-3", FEATURE_VERSION)
DEFAULT_BUCKETS = 1 << 20

_CODE_RE = re.compile(r"\[([a-z_]+\.[a-z_]+)\]")
_FALSE_PRE_RE = re.compile(r"precondition false: \((\S+?)[ )]")
_STEP_RE = re.compile(r"step (\d+) \(([^)]*)\)")
_WORD_RE = re.compile(r"[a-z][a-z_\-]{2,}")
_DOMAIN_MARKERS = (":durative-action", ":functions", "increase", "decrease", "(when", ":types", "either",
                   ":negative-preconditions", ":conditional-effects", ":numeric-fluents", ":constants",
                   "forall", "exists", ":derived")
_LOG_TAIL_CHARS = 400
_ERR_CHARS = 1200
# What is read of a state at most, before any parsing (far above real tasks: planbench PDDL is a
# few KB, a natural-language task a few KB). Larger PDDL gets the neutral "too large" features.
MAX_PDDL_CHARS = 64_000
MAX_TASK_CHARS = 16_000  # the task's last characters (where its goal is stated)
MAX_PLAN_CHARS = 64_000
# Time for the expensive reads (parsing, reachability, goal words) of one state; past it each
# falls back to its neutral feature.
FEATURE_BUDGET_S = 0.08


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower())


class FeatureVersionError(InputError, ValueError):
    pass


def state_features(state: EpisodeState, version: str = FEATURE_VERSION) -> list[str]:
    if version not in FEATURE_VERSIONS:
        raise FeatureVersionError(f"feature set {version!r} is not computed by this version "
                                  f"(it computes {', '.join(FEATURE_VERSIONS)}); retrain the model")
    with time_budget(FEATURE_BUDGET_S):
        return _state_features(state, types=version != "halo-feat-3")


def _state_features(state: EpisodeState, *, types: bool = True) -> list[str]:
    feats = ["bias", f"cat={state.error_category or 'none'}", f"found={state.plan_found}",
             f"valid={state.plan_valid}", f"planner={state.target_planner}", f"step={min(state.step, 9)}",
             f"dom_empty={not state.domain.strip()}", f"prob_empty={not state.problem.strip()}",
             f"plan_empty={not state.plan.strip()}", f"has_solution={bool(state.proposed_solution.strip())}"]
    plan_len = len([ln for ln in state.plan[:MAX_PLAN_CHARS].splitlines() if ln.strip() and not ln.startswith(";")])
    feats.append(f"plan_len={min(plan_len, 20) // 4}")
    hist = state.history
    last = hist[-1] if hist else -1
    feats.append(f"last={last}")
    feats.append(f"last2={hist[-2] if len(hist) > 1 else -1},{last}")
    feats.extend(f"tried={a}" for a in set(hist))
    feats.extend(f"tried2={a}" for a in {a for a in hist if hist.count(a) >= 2})
    feats.append(f"cat_last={state.error_category}|{last}")
    errors = state.validator_errors[-_ERR_CHARS:]
    log = state.planner_log[-_LOG_TAIL_CHARS:]
    codes = set(_CODE_RE.findall(errors)) | set(_CODE_RE.findall(log))
    feats.extend(f"code={c}" for c in codes)
    feats.extend(f"code_last={c}|{last}" for c in codes)
    err_words = _words(errors)
    feats.extend(f"err={w}" for w in set(err_words))
    feats.extend(f"err2={a}_{b}" for a, b in set(zip(err_words, err_words[1:], strict=False)))
    feats.extend(f"log={w}" for w in set(_words(log)))
    domain = state.domain.lower()
    feats.extend(f"dom:{m}" for m in _DOMAIN_MARKERS if m in domain)
    failure = _failure_features(state) + _goal_features(state)
    # The whole symptom (category, codes, failure analysis) together with the last k agents
    # tried: what decides the next candidate when the first repair did not take.
    key = "|".join([state.error_category or "none", *sorted(codes), *failure])
    for k in (0, 1, 2, 3):
        feats.append(f"ctx{k}={key}|{hist[-k:] if k else ''}")
    feats.extend(failure)
    if len(state.domain) > MAX_PDDL_CHARS or len(state.problem) > MAX_PDDL_CHARS:
        static: tuple[str, ...] = ("static=too_large",)
    else:
        try:
            static = _static_features(state.domain, state.problem) + _goal_text(state)
            if types:
                static += _type_features(state.domain, state.problem)
        except OverBudget:
            static = ("static=unknown",)
    feats.extend(static)
    feats.extend(f"{f}|{state.error_category or 'none'}" for f in static)
    return feats


@functools.lru_cache(maxsize=512)
def _static_features(domain: str, problem: str) -> tuple[str, ...]:
    """What an orchestrator sees by reading the PDDL: whether some action's positive
    precondition uses a predicate that no initial fact and no effect establishes (a
    precondition nothing can make true), and whether that predicate takes no arguments."""
    check_budget()  # past the budget: OverBudget, uncached (the caller falls back)
    try:
        dom, prob = parse_shared(domain), parse_shared(problem)
    except SExprError:
        return ("static=unparsed",)
    init = {str(a[0]).lower() for a in (section(prob, ":init") or [])[1:] if isinstance(a, list) and a}
    added: set[str] = set()
    needed: dict[str, int] = {}
    for action in sections(dom, ":action"):
        for i in range(2, len(action) - 1):
            if action[i] == ":effect":
                added |= _atoms(action[i + 1], positive_only=True)
            elif action[i] == ":precondition":
                for atom in _atoms(action[i + 1], positive_only=True, arity=needed):
                    needed.setdefault(atom, 0)
    orphans = [p for p in needed if p not in init and p not in added and p not in ("=", "and")]
    if not orphans:
        return ("static=all_established",)
    return ("static=unestablished_pre", f"static=unestablished_arity0={any(needed[p] == 0 for p in orphans)}")


@functools.lru_cache(maxsize=512)
def _type_features(domain: str, problem: str) -> tuple[str, ...]:
    """Whether the PDDL's types agree with each other, as a reader checks them by hand: an action
    passes a variable to a predicate whose parameter is of a narrower type (`type_use=wider`) or
    of a type the hierarchy does not relate to it at all (`type_use=unrelated`), and an initial
    fact names an object whose type does not fit its predicate (`type_init=mismatch`), and a
    predicate's argument type has no object of it or below it (`type_pred=unpopulated`). These
    tell a type hierarchy that lost a parent, or a predicate typed too narrowly, from a missing
    fact or a wrong goal, which all leave the planner proving the task unsolvable."""
    check_budget()  # past the budget: OverBudget, uncached (the caller falls back)
    try:
        dom, prob = parse_shared(domain), parse_shared(problem)
    except SExprError:
        return ()
    types = section(dom, ":types")
    if not types:
        return ("types=none",)
    parent = {child.lower(): typ.lower() for child, typ in typed_list(types[1:])}
    preds = {str(p[0]).lower(): [t.lower() for _, t in typed_list(p[1:])]
             for p in (section(dom, ":predicates") or [])[1:] if isinstance(p, list) and p and isinstance(p[0], str)}
    objects = {o.lower(): t.lower() for key, tree in ((":constants", dom), (":objects", prob))
               for o, t in typed_list((section(tree, key) or [key])[1:])}
    found = _action_type_uses(dom, parent, preds) | _init_type_uses(prob, objects, parent, preds)
    used = {t for ts in preds.values() for t in ts if t != "object"}
    if any(not any(_is_sub(have, t, parent) for have in objects.values()) for t in used):
        found.add("type_pred=unpopulated")  # a predicate argument type that no object has
    return tuple(sorted(found)) or ("types=consistent",)


def _is_sub(typ: str, want: str, parent: dict[str, str]) -> bool:
    seen: set[str] = set()
    while typ not in seen:
        if typ == want or want == "object":
            return True
        seen.add(typ)
        typ = parent.get(typ, "object")
    return False


def _action_type_uses(dom: list, parent: dict[str, str], preds: dict[str, list[str]]) -> set[str]:
    out: set[str] = set()
    for action in sections(dom, ":action"):
        params: dict[str, str] = {}
        for i in range(2, len(action) - 1):
            if action[i] == ":parameters" and isinstance(action[i + 1], list):
                params = {v.lower(): t.lower() for v, t in typed_list(action[i + 1])}
        for i in range(2, len(action) - 1):
            if action[i] in (":precondition", ":effect"):
                for atom in _typed_atoms(action[i + 1]):
                    for arg, want in zip(atom[1:], preds.get(atom[0], []), strict=False):
                        have = params.get(arg)
                        if have and not _is_sub(have, want, parent):
                            out.add("type_use=wider" if _is_sub(want, have, parent) else "type_use=unrelated")
    return out


def _init_type_uses(prob: list, objects: dict[str, str], parent: dict[str, str],
                    preds: dict[str, list[str]]) -> set[str]:
    for fact in (section(prob, ":init") or [])[1:]:
        if isinstance(fact, list) and fact and isinstance(fact[0], str) and all(isinstance(a, str) for a in fact):
            for arg, want in zip(fact[1:], preds.get(fact[0].lower(), []), strict=False):
                have = objects.get(arg.lower())
                if have and not _is_sub(have, want, parent):
                    return {"type_init=mismatch"}
    return set()


def _typed_atoms(expr: object) -> list[list[str]]:
    """The atoms of a precondition or effect (under and/not/or/imply/when/forall/exists), lower case."""
    if not isinstance(expr, list) or not expr or not isinstance(expr[0], str):
        return []
    head = expr[0].lower()
    if head in ("and", "or", "not", "imply", "when", "forall", "exists", "preference"):
        return [a for e in expr[1:] for a in _typed_atoms(e)]
    return [[x.lower() for x in expr]] if all(isinstance(x, str) for x in expr) else []


_GOAL_TEXT_RE = re.compile(r"\bgoal\b", re.IGNORECASE)


def _goal_text(state: EpisodeState) -> tuple[str, ...]:
    try:
        return _goal_text_features(state.task_description[-MAX_TASK_CHARS:], state.problem)
    except OverBudget:
        return ("goal_text=unknown",)


@functools.lru_cache(maxsize=512)
def _goal_text_features(description: str, problem: str) -> tuple[str, ...]:
    """Whether the problem's goal atoms name their arguments in the order the task's own words
    give them (after its last "goal"): a goal written the wrong way round is visible there when
    the PDDL uses the description's object names."""
    hits = [m.end() for m in _GOAL_TEXT_RE.finditer(description)]
    try:
        prob = parse_shared(problem)
    except SExprError:
        return ()
    goal = section(prob, ":goal")
    if not hits or goal is None or len(goal) < 2:
        return ()
    # clauses: split at commas outside parentheses ("on(d1, peg3), on(d2, peg3)"), "and", ";", "."
    clauses = re.split(r",(?![^()]*\))|;|\band\b|\.(?:\s|$)", description[hits[-1]:].lower())
    verdicts: set[str] = set()
    for atom in _goal_atoms(goal[1]):
        if len(atom) < 3:
            continue
        orders = set()
        for clause in clauses:
            check_budget()  # OverBudget leaves uncached (the caller falls back)
            places = [re.search(rf"(?<![\w-]){re.escape(arg.lower())}(?![\w-])", clause) for arg in atom[1:]]
            if all(places):
                starts = [m.start() for m in places if m]
                orders.add("in_order" if starts == sorted(starts) else "reversed")
        if orders:
            verdicts.add("in_order" if "in_order" in orders else "reversed")
    return tuple(f"goal_text={v}" for v in sorted(verdicts)) or ("goal_text=unmatched",)


def _goal_atoms(expr: object) -> list[list[str]]:
    if not isinstance(expr, list) or not expr or not isinstance(expr[0], str):
        return []
    if expr[0].lower() == "and":
        return [a for e in expr[1:] for a in _goal_atoms(e)]
    return [expr] if all(isinstance(x, str) for x in expr) else []


def _atoms(expr: object, *, positive_only: bool, arity: dict[str, int] | None = None) -> set[str]:
    out: set[str] = set()
    if not isinstance(expr, list) or not expr:
        return out
    head = str(expr[0]).lower() if isinstance(expr[0], str) else ""
    if head == "not":
        return out if positive_only else _atoms(expr[1] if len(expr) > 1 else [], positive_only=False, arity=arity)
    if head in ("and", "or", "imply", "forall", "exists", "when", "preference"):
        for e in expr[1:]:
            out |= _atoms(e, positive_only=positive_only, arity=arity)
        return out
    if head in ("increase", "decrease", "assign", "scale-up", "scale-down", ">", "<", ">=", "<=", "="):
        return out
    if head:
        out.add(head)
        if arity is not None:
            arity[head] = len(expr) - 1
    return out


# The planner and validator ran on parsed PDDL: the categories where the goal's relaxed
# reachability tells "the initial state lacks a fact" from "the goal contradicts itself".
_REACH_CATEGORIES = frozenset({"unsolvable_proved", "plan_invalid", "search_timeout"})
_DIAG_LINE_RE = re.compile(r"problem\.pddl:(\d+):")


def _goal_features(state: EpisodeState) -> list[str]:
    """Is the goal reachable when deletes are ignored (train/reachability.py), and in which
    section of the problem file does the first problem diagnostic point (a type error in the
    goal is a goal written wrongly, one in the initial state a wrong fact)?"""
    out: list[str] = []
    if state.error_category in _REACH_CATEGORIES:
        too_large = len(state.domain) > MAX_PDDL_CHARS or len(state.problem) > MAX_PDDL_CHARS
        out.append(f"relaxed_goal={'unknown' if too_large else _reachability(state.domain, state.problem)}")
    m = _DIAG_LINE_RE.search(state.validator_errors) or _DIAG_LINE_RE.search(state.planner_log)
    if m:
        out.append(f"diag_section={problem_section_at(state.problem[:MAX_PDDL_CHARS], int(m.group(1)))}")
    return out


def _reachability(domain: str, problem: str) -> str:
    try:
        return goal_reachability(domain, problem)
    except OverBudget:
        return "unknown"


def _failure_features(state: EpisodeState) -> list[str]:
    """Where a failing precondition's predicate comes from, and whether the failing step repeats
    the one before it: cheap static analysis a human orchestrator would do by eye."""
    out: list[str] = []
    m = _FALSE_PRE_RE.search(state.validator_errors)
    if m:
        pat = "(" + m.group(1).lower()
        domain, problem = state.domain.lower(), state.problem.lower()
        init = problem.split(":init", 1)[-1]
        effects = [part.split(":action", 1)[0] for part in domain.split(":effect")[1:]]
        out.append(f"false_pre_in_init={pat in init}")
        out.append(f"false_pre_in_effects={any(pat in e for e in effects)}")
        out.append(f"false_pre_declared={pat in domain.split(':action', 1)[0]}")
    step = _STEP_RE.search(state.validator_errors)
    if step:
        lines = [ln.strip().lower() for ln in state.plan.splitlines() if ln.strip() and not ln.startswith(";")]
        i = int(step.group(1))
        out.append(f"fail_step_repeats={2 <= i <= len(lines) and lines[i - 1] == lines[i - 2]}")
        out.append(f"fail_step_first={i == 1}")
    return out


def hash_features(feats: Iterable[str], buckets: int = DEFAULT_BUCKETS) -> list[int]:
    return sorted({zlib.crc32(f.encode()) % buckets for f in feats})

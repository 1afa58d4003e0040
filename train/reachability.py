"""Delete-relaxed reachability of a problem's goal: a static read of the PDDL for the fast policy.

Ignoring delete effects and negative preconditions over-approximates what the actions can make
true. A goal atom that is unreachable even then needs a fact nothing establishes (the initial
state lacks something); a goal that is reachable in the relaxation while the planner proves the
task unsolvable is contradictory as stated (two goal atoms that cannot hold together, e.g. one
written the wrong way round), and so is one whose unreachable atoms are all reachable with their
arguments reversed. All of it is read from the domain and problem the policy sees.

The fixpoint is computed lifted, by joining each action's positive preconditions against the
facts reached so far; `max_bindings` and the caller's time budget cap the work per call (the
answer is then "unknown").
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

from rollout.pddl.model import PDDLParseError
from rollout.pddl.sexpr import SExpr, SExprError
from rollout.pddl.state_space import World, load_world
from train.cost_budget import check_budget

Atom = tuple[str, ...]
# bindings tried per call: well above what the planbench and bundled IPC tasks need
# (docs/results/2026-12-03-code-figures.md)
DEFAULT_MAX_BINDINGS = 50_000


class _Budget(Exception):
    pass


def _spend(budget: list[int]) -> None:
    """One binding tried: past `max_bindings` the answer is "unknown"; past the caller's time
    budget (looked at every 1024 bindings) OverBudget leaves the call, so no cache keeps an answer
    that only a busy moment made unknown."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _Budget
    if budget[0] & 1023 == 0:
        check_budget()


def _positive_atoms(expr: SExpr) -> list[list[str]]:
    """The positive atoms of a precondition's conjunctive part (disjunctions, quantifiers and
    negations are dropped: fewer conditions, a larger relaxation)."""
    if not isinstance(expr, list) or not expr or not isinstance(expr[0], str):
        return []
    head = expr[0]
    if head == "and":
        return [a for e in expr[1:] for a in _positive_atoms(e)]
    if head in ("not", "or", "imply", "forall", "exists", "=", "<", ">", "<=", ">="):
        return []
    return [expr] if all(isinstance(x, str) for x in expr) else []


def _adds(expr: SExpr) -> list[tuple[list[str], list[str]]]:
    """(atom, variables quantified by an enclosing forall) for each add effect; conditional effects
    count as unconditional (the relaxation)."""
    if not isinstance(expr, list) or not expr or not isinstance(expr[0], str):
        return []
    head = expr[0]
    if head == "and":
        return [a for e in expr[1:] for a in _adds(e)]
    if head == "when" and len(expr) > 2:
        return _adds(expr[2])
    if head == "forall" and len(expr) > 2 and isinstance(expr[1], list):
        bound = [v for v in expr[1] if isinstance(v, str) and v.startswith("?")]
        return [(atom, bound + qs) for atom, qs in _adds(expr[2])]
    if head in ("not", "increase", "decrease", "assign", "scale-up", "scale-down"):
        return []
    return [(expr, [])] if all(isinstance(x, str) for x in expr) else []


class _Facts:
    """Ground atoms by predicate and by (predicate, argument position, value), for joins."""

    def __init__(self) -> None:
        self.by_pred: dict[str, set[Atom]] = {}
        self.by_arg: dict[tuple[str, int, str], list[Atom]] = {}

    def add(self, atom: Atom) -> bool:
        group = self.by_pred.setdefault(atom[0], set())
        if atom in group:
            return False
        group.add(atom)
        for i, value in enumerate(atom[1:], 1):
            self.by_arg.setdefault((atom[0], i, value), []).append(atom)
        return True

    def __contains__(self, atom: Atom) -> bool:
        return atom in self.by_pred.get(atom[0], ())

    def candidates(self, atom: list[str], binding: dict[str, str]) -> Iterable[Atom]:
        best: Iterable[Atom] = self.by_pred.get(atom[0], ())
        size = len(best)  # type: ignore[arg-type]
        for i, term in enumerate(atom[1:], 1):
            value = binding.get(term) if term.startswith("?") else term
            if value is not None:
                hits = self.by_arg.get((atom[0], i, value), ())
                if len(hits) < size:
                    best, size = hits, len(hits)
        return best


def _order(pre: list[list[str]], bound: set[str]) -> list[list[str]]:
    """A join order: each next atom the one with the most terms already bound."""
    rest, out, bound = list(pre), [], set(bound)
    while rest:
        k = max(range(len(rest)), key=lambda i: sum(1 for t in rest[i][1:] if not t.startswith("?") or t in bound))
        atom = rest.pop(k)
        out.append(atom)
        bound.update(t for t in atom[1:] if t.startswith("?"))
    return out


def _bindings(pre: list[list[str]], facts: _Facts, binding: dict[str, str],
              budget: list[int]) -> Iterator[dict[str, str]]:
    """Every extension of `binding` under which all of `pre` (in join order) is in `facts`."""
    if not pre:
        yield binding
        return
    atom, rest = pre[0], pre[1:]
    for fact in list(facts.candidates(atom, binding)):
        _spend(budget)
        if len(fact) != len(atom):
            continue
        new = dict(binding)
        for term, value in zip(atom[1:], fact[1:], strict=True):
            if term.startswith("?"):
                if new.setdefault(term, value) != value:
                    break
            elif term != value:
                break
        else:
            yield from _bindings(rest, facts, new, budget)


def relaxed_reachable(world: World, max_bindings: int = DEFAULT_MAX_BINDINGS,
                      goal: set[Atom] | None = None) -> set[Atom] | None:
    """Every atom reachable under the delete relaxation (or, with `goal`, the atoms reached by the
    round in which all of `goal` is), or None past the budget.

    Semi-naive: after the first round, an action is re-joined only with one precondition bound to
    a fact the previous round added, so each binding is derived about once."""
    facts = _Facts()
    for a in world.problem.init:
        facts.add(a)
    actions = []
    for act in world.domain.actions.values():
        pre = _positive_atoms(act.precondition)
        # per precondition i: the order in which the others join once atom i is bound to a new fact
        seeded = [_order(pre[:i] + pre[i + 1:], {t for t in atom[1:] if t.startswith("?")})
                  for i, atom in enumerate(pre)]
        actions.append((act, _order(pre, set()), pre, seeded, _adds(act.effect)))
    typed = {t: world.objects_of(t) for t in {t for act in world.domain.actions.values() for _, t in act.params}}
    budget = [max_bindings]
    delta = _Facts()
    for a in world.problem.init:
        delta.add(a)
    first = True
    try:
        while delta.by_pred or first:
            new = _Facts()
            for act, ordered, pre, seeded, adds in actions:
                if first:
                    found = list(_bindings(ordered, facts, {}, budget))
                else:
                    found = []
                    for i, atom in enumerate(pre):
                        if atom[0] in delta.by_pred:
                            for b in _bindings([atom], delta, {}, budget):
                                found.extend(_bindings(seeded[i], facts, b, budget))
                for b in found:
                    if not all(world.domain.is_subtype(world.objects.get(b[v], "object"), t)
                               for v, t in act.params if v in b):
                        continue
                    free = [(v, t) for v, t in act.params if v not in b]
                    for full in _extend(typed, b, free, budget):
                        for atom, quantified in adds:
                            for ground in _ground(world, atom, full, quantified, budget):
                                if ground not in facts:
                                    new.add(ground)
            for group in new.by_pred.values():
                for a in group:
                    facts.add(a)
            delta, first = new, False
            if goal is not None and all(g in facts for g in goal):
                break
    except _Budget:
        return None
    return {a for group in facts.by_pred.values() for a in group}


def _extend(typed: dict[str, list[str]], binding: dict[str, str], free: list[tuple[str, str]],
            budget: list[int]) -> Iterator[dict[str, str]]:
    if not free:
        yield binding
        return
    (var, typ), rest = free[0], free[1:]
    for obj in typed[typ]:
        _spend(budget)
        yield from _extend(typed, {**binding, var: obj}, rest, budget)


def _ground(world: World, atom: list[str], binding: dict[str, str], quantified: list[str],
            budget: list[int]) -> Iterator[Atom]:
    unbound = [v for v in quantified if v not in binding]
    everything = {"object": list(world.objects)}
    for full in _extend(everything, binding, [(v, "object") for v in unbound], budget):
        yield tuple([atom[0], *(full.get(t, t) for t in atom[1:])])


@functools.lru_cache(maxsize=256)
def goal_reachability(domain: str, problem: str) -> str:
    """"reachable" (every positive goal atom is relaxed-reachable), "unreachable",
    "unreachable_reversed_reachable" (each unreachable goal atom is reachable with its arguments
    reversed), or "unknown" (the PDDL does not parse, the simulator does not model it, or the
    budget ran out)."""
    try:
        world = load_world(domain, problem)
    except (PDDLParseError, SExprError, RecursionError):
        return "unknown"
    goal = {tuple(a) for a in _positive_atoms(world.problem.goal)}
    reached = relaxed_reachable(world, goal=goal)
    if reached is None:
        return "unknown"
    missing = [g for g in goal if g not in reached]
    if not missing:
        return "reachable"
    # every unreachable goal atom is reachable with its arguments the other way round: most likely
    # written the wrong way round (e.g. (at l0-1 p0) for (at p0 l0-1)), not a missing fact
    if all(len(g) >= 3 and (g[0], *reversed(g[1:])) in reached for g in missing):
        return "unreachable_reversed_reachable"
    return "unreachable"

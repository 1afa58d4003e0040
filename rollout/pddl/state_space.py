"""A plan simulator over a parsed domain/problem: successor states, goal tests, sub-problems.

Used by the deterministic repair agents (13-17) to score many candidate plans cheaply; the real
validator in `solvers/` still has the final word on every plan an agent returns.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rollout.pddl.model import (
    Action,
    Atom,
    Domain,
    PDDLParseError,
    Problem,
    Unsupported,
    parse_domain,
    parse_problem,
    strict_typed_list,
)
from rollout.pddl.printer import unparse
from rollout.pddl.sexpr import SExpr
from solvers.errors import HaloError

_V = TypeVar("_V")


# Transitions a World remembers before it starts over (each holds a state another one shares).
MEMO_MAX = 50_000


@dataclass
class World:
    """A domain/problem pair ready for simulation.

    It remembers every transition it computed: candidate plans of a repair search share long
    prefixes, and a step from a state is then looked up instead of re-applied.
    """

    domain: Domain
    problem: Problem
    # (state, action, args) -> successor, or the reason the step is not applicable
    _transitions: dict[tuple[frozenset[Atom], str, tuple[str, ...]], frozenset[Atom] | str] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _added: dict[tuple[frozenset[Atom], str, tuple[str, ...]], frozenset[Atom]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _goal_reached: dict[frozenset[Atom], bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    _goal_atoms: dict[frozenset[Atom], int] = field(default_factory=dict, init=False, repr=False, compare=False)

    @functools.cached_property
    def objects(self) -> dict[str, str]:
        # Built once: plan search binds thousands of steps against the same world.
        return {**self.domain.constants, **self.problem.objects}

    def objects_of(self, typ: str) -> list[str]:
        return [o for o, t in self.objects.items() if self.domain.is_subtype(t, typ)]

    def bind(self, action_name: str, args: Sequence[str]) -> tuple[Action, dict[str, str]]:
        act = self.domain.actions.get(action_name)
        if act is None:
            raise KeyError(f"unknown action {action_name}")
        if len(args) != len(act.params):
            raise KeyError(f"{action_name} takes {len(act.params)} arguments, got {len(args)}")
        objs = self.objects
        binding: dict[str, str] = {}
        for (var, typ), arg in zip(act.params, args, strict=True):
            if arg not in objs:
                raise KeyError(f"unknown object {arg}")
            if not self.domain.is_subtype(objs[arg], typ):
                raise KeyError(f"{arg} is not of type {typ}")
            binding[var] = arg
        return act, binding

    def holds(self, formula: SExpr, state: frozenset[Atom] | set[Atom], binding: dict[str, str]) -> bool:
        if isinstance(formula, str):
            raise PDDLParseError(f"unexpected symbol in a formula: {formula}")
        if not formula:
            return True
        head = formula[0]
        if head == "and":
            return all(self.holds(f, state, binding) for f in formula[1:])
        if head == "or":
            return any(self.holds(f, state, binding) for f in formula[1:])
        if head == "not":
            return not self.holds(formula[1], state, binding)
        if head == "imply":
            return (not self.holds(formula[1], state, binding)) or self.holds(formula[2], state, binding)
        if head in ("forall", "exists"):
            combos = self._quantified(formula[1], binding)
            test = all if head == "forall" else any
            return test(self.holds(formula[2], state, b) for b in combos)
        if head == "=":
            return _subst(formula[1], binding) == _subst(formula[2], binding)
        return ground_atom(formula, binding) in state

    def _quantified(self, variables: SExpr, binding: dict[str, str]) -> Iterable[dict[str, str]]:
        if not isinstance(variables, list):
            raise PDDLParseError("quantifier variables must be a list")
        typed = strict_typed_list(variables)
        domains = [self.objects_of(t) for _, t in typed]
        for values in itertools.product(*domains):
            yield {**binding, **{v: val for (v, _), val in zip(typed, values, strict=True)}}

    def effects(self, effect: SExpr, state: frozenset[Atom], binding: dict[str, str],
                adds: set[Atom], dels: set[Atom]) -> None:
        if isinstance(effect, str) or not effect:
            return
        head = effect[0]
        if head == "and":
            for e in effect[1:]:
                self.effects(e, state, binding, adds, dels)
        elif head == "not":
            dels.add(ground_atom(effect[1], binding))
        elif head == "when":
            if self.holds(effect[1], state, binding):
                self.effects(effect[2], state, binding, adds, dels)
        elif head == "forall":
            for b in self._quantified(effect[1], binding):
                self.effects(effect[2], state, b, adds, dels)
        elif head in ("increase", "decrease", "assign", "scale-up", "scale-down"):
            return
        else:
            adds.add(ground_atom(effect, binding))

    def apply(self, state: frozenset[Atom], action_name: str, args: Sequence[str]) -> frozenset[Atom]:
        """The successor state; raises `NotApplicable` with the reason."""
        key = (state, action_name, tuple(args))
        known = self._transitions.get(key)
        if known is None:
            known = self._remember(self._transitions, key, self._transition(state, action_name, key[2]))
        if isinstance(known, str):
            raise NotApplicable(known)
        return known

    def _transition(self, state: frozenset[Atom], action_name: str, args: tuple[str, ...]) -> frozenset[Atom] | str:
        """The successor state, or why the step cannot be applied."""
        try:
            act, binding = self.bind(action_name, args)
        except KeyError as exc:
            return str(exc.args[0])
        if not self.holds(act.precondition, state, binding):
            return f"precondition of ({action_name} {' '.join(args)}) is false"
        adds: set[Atom] = set()
        dels: set[Atom] = set()
        self.effects(act.effect, state, binding, adds, dels)
        return frozenset((state - dels) | adds)

    def added_atoms(self, state: frozenset[Atom], action_name: str, args: Sequence[str]) -> frozenset[Atom]:
        """The atoms a step adds in `state`, precondition or not; KeyError if it does not bind."""
        key = (state, action_name, tuple(args))
        known = self._added.get(key)
        if known is None:
            act, binding = self.bind(action_name, args)
            adds: set[Atom] = set()
            self.effects(act.effect, state, binding, adds, set())
            known = self._remember(self._added, key, frozenset(adds))
        return known

    def goal_reached(self, state: frozenset[Atom]) -> bool:
        known = self._goal_reached.get(state)
        if known is None:
            known = self._remember(self._goal_reached, state, self.holds(self.problem.goal, state, {}))
        return known

    def goal_atoms_satisfied(self, state: frozenset[Atom]) -> int:
        """How many top-level goal conjuncts hold (a smooth score for search)."""
        known = self._goal_atoms.get(state)
        if known is None:
            goal = self.problem.goal
            parts = goal[1:] if isinstance(goal, list) and goal and goal[0] == "and" else [goal]
            known = self._remember(self._goal_atoms, state, sum(1 for g in parts if self.holds(g, state, {})))
        return known

    @staticmethod
    def _remember(memo: dict[Any, _V], key: Any, value: _V) -> _V:
        if len(memo) >= MEMO_MAX:
            memo.clear()
        memo[key] = value
        return value

    def ground_precondition_atoms(self, action_name: str, args: Sequence[str]) -> list[SExpr]:
        """The ground literals of a step's precondition when it is a conjunction of literals."""
        act, binding = self.bind(action_name, args)
        pre = act.precondition
        parts = pre[1:] if isinstance(pre, list) and pre and pre[0] == "and" else [pre]
        out: list[SExpr] = []
        for lit in parts:
            if isinstance(lit, list) and lit and lit[0] == "not" and isinstance(lit[1], list):
                out.append(["not", list(ground_atom(lit[1], binding))])
            elif isinstance(lit, list) and lit and lit[0] not in ("or", "imply", "forall", "exists", "when", "="):
                out.append(list(ground_atom(lit, binding)))
            else:
                raise Unsupported(f"precondition of {action_name} is not a conjunction of literals")
        return out


class NotApplicable(HaloError):
    """A plan step cannot be applied in the current state."""


def _subst(term: SExpr, binding: dict[str, str]) -> str:
    if not isinstance(term, str):
        raise PDDLParseError(f"expected a term, got {unparse(term)}")
    return binding.get(term, term)


def ground_atom(atom: SExpr, binding: dict[str, str]) -> Atom:
    if not isinstance(atom, list) or not atom or not isinstance(atom[0], str):
        raise PDDLParseError(f"expected an atom, got {unparse(atom)}")
    return (atom[0], *(_subst(t, binding) for t in atom[1:]))


Step = tuple[str, tuple[str, ...]]  # (action name, args)


@dataclass(frozen=True)
class SimResult:
    """What happened when a plan was run from the initial state."""

    executed: int  # steps applied before the first failure (== len(plan) if all applied)
    states: tuple[frozenset[Atom], ...]  # states[k] = state after k steps, k = 0..executed
    failure: str = ""  # why step `executed` (0-based) failed; "" if all applied
    goal_reached: bool = False

    @property
    def valid(self) -> bool:
        return not self.failure and self.goal_reached

    @property
    def failing_index(self) -> int | None:
        return self.executed if self.failure else None


def simulate(world: World, plan: Sequence[Step]) -> SimResult:
    state = world.problem.init
    states = [state]
    for i, (name, args) in enumerate(plan):
        try:
            state = world.apply(state, name, args)
        except NotApplicable as exc:
            return SimResult(i, tuple(states), str(exc), False)
        states.append(state)
    return SimResult(len(plan), tuple(states), "", world.goal_reached(state))


def render_problem(world: World, init: Iterable[Atom], goal: SExpr, name: str = "subproblem") -> str:
    """A problem text with the given init and goal, the same objects, numeric init and metric."""
    objs = " ".join(f"{o} - {t}" if t != "object" else o for o, t in world.problem.objects.items())
    facts = "\n    ".join("(" + " ".join(a) + ")" for a in sorted(init))
    numeric = "\n    ".join(unparse(f) for f in world.problem.numeric_init)
    metric = unparse(world.problem.metric) if world.problem.metric is not None else ""
    return (f"(define (problem {name})\n  (:domain {world.domain.name})\n  (:objects {objs})\n"
            f"  (:init\n    {facts}\n    {numeric})\n  (:goal {unparse(goal)})\n  {metric})\n")


@functools.lru_cache(maxsize=1024)
def load_world(domain_text: str, problem_text: str) -> World:
    """The world of a domain/problem text pair, shared by every caller with the same texts (and so
    are its transitions): read it, never modify it. Parse errors raise each time."""
    return World(_shared_domain(domain_text), _shared_problem(problem_text))


# A loop often changes only one of the two files, and unfaulted domains repeat across episodes.
_shared_domain = functools.lru_cache(maxsize=1024)(parse_domain)
_shared_problem = functools.lru_cache(maxsize=4096)(parse_problem)

"""A small PDDL model: s-expressions -> domain/problem structures, and a plan simulator.

Used by the deterministic repair agents (13-17) to score many candidate plans cheaply; the real
validator in `solvers/` still has the final word on every plan an agent returns. Supports
STRIPS, typing, constants, negative preconditions, equality, quantifiers (forall/exists),
disjunction/implication and conditional effects. Numeric effects (action costs) are ignored
for applicability. Derived predicates and durative actions raise `Unsupported`, so callers can
fall back to validator-only checking.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rollout.tasks.sexpr import tokenize

SExpr = str | list["SExpr"]
Atom = tuple[str, ...]  # ("on", "a", "b")
_V = TypeVar("_V")


class PDDLParseError(ValueError):
    """The text is not PDDL this model can read."""


class Unsupported(PDDLParseError):
    """Valid PDDL using a feature the simulator does not model (derived predicates, durative actions)."""


# --- s-expressions --------------------------------------------------------------------------


def parse_sexpr(text: str) -> SExpr:
    tokens = tokenize(text)
    if not tokens:
        raise PDDLParseError("empty PDDL text")
    pos = 0

    def read() -> SExpr:
        nonlocal pos
        if pos >= len(tokens):
            raise PDDLParseError("unexpected end of text: unbalanced parentheses")
        tok = tokens[pos]
        pos += 1
        if tok == ")":
            raise PDDLParseError("unexpected ')'")
        if tok != "(":
            return tok.lower()
        out: list[SExpr] = []
        while True:
            if pos >= len(tokens):
                raise PDDLParseError("unexpected end of text: unbalanced parentheses")
            if tokens[pos] == ")":
                pos += 1
                return out
            out.append(read())

    expr = read()
    if pos != len(tokens):
        raise PDDLParseError(f"unexpected text after the closing parenthesis: {' '.join(tokens[pos:pos + 5])}")
    return expr


# --- structures -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    name: str
    params: tuple[tuple[str, str], ...]  # (?var, type)
    precondition: SExpr
    effect: SExpr


@dataclass
class Domain:
    name: str
    requirements: tuple[str, ...] = ()
    supertypes: dict[str, str] = field(default_factory=dict)  # type -> parent
    constants: dict[str, str] = field(default_factory=dict)  # name -> type
    predicates: dict[str, int] = field(default_factory=dict)  # name -> arity
    actions: dict[str, Action] = field(default_factory=dict)

    def is_subtype(self, sub: str, sup: str) -> bool:
        seen = set()
        while sub not in seen:
            if sub == sup or sup == "object":
                return True
            seen.add(sub)
            if sub not in self.supertypes:
                return False
            sub = self.supertypes[sub]
        return False


@dataclass
class Problem:
    name: str
    domain_name: str
    objects: dict[str, str] = field(default_factory=dict)  # name -> type
    init: frozenset[Atom] = frozenset()
    numeric_init: tuple[SExpr, ...] = ()  # (= (total-cost) 0) and alike, kept verbatim
    goal: SExpr = field(default_factory=lambda: ["and"])
    metric: SExpr | None = None


def _typed_list(items: Sequence[SExpr]) -> list[tuple[str, str]]:
    """`a b - t c` -> [(a,t),(b,t),(c,object)]; `(either ...)` types collapse to object."""
    out: list[tuple[str, str]] = []
    pending: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        if item == "-":
            if i + 1 >= len(items):
                raise PDDLParseError("'-' without a type in a typed list")
            typ = items[i + 1]
            type_name = typ if isinstance(typ, str) else "object"
            out.extend((p, type_name) for p in pending)
            pending = []
            i += 2
            continue
        if not isinstance(item, str):
            raise PDDLParseError(f"unexpected list in a typed list: {unparse(item)}")
        pending.append(item)
        i += 1
    out.extend((p, "object") for p in pending)
    return out


def _sections(expr: SExpr, kind: str) -> tuple[str, list[list[SExpr]]]:
    if not isinstance(expr, list) or len(expr) < 2 or expr[0] != "define":
        raise PDDLParseError(f"a {kind} must start with (define ...)")
    head = expr[1]
    if not isinstance(head, list) or len(head) != 2 or head[0] != kind or not isinstance(head[1], str):
        raise PDDLParseError(f"expected ({kind} <name>) after define")
    body = [s for s in expr[2:]]
    for s in body:
        if not isinstance(s, list) or not s or not isinstance(s[0], str):
            raise PDDLParseError(f"unexpected element in {kind}: {unparse(s)}")
    return head[1], body  # type: ignore[return-value]


def parse_domain(text: str) -> Domain:
    name, sections = _sections(parse_sexpr(text), "domain")
    dom = Domain(name)
    for sec in sections:
        key = sec[0]
        if key == ":requirements":
            dom.requirements = tuple(str(r) for r in sec[1:])
        elif key == ":types":
            for t, parent in _typed_list(sec[1:]):
                if t != "object":
                    dom.supertypes[t] = parent
        elif key == ":constants":
            dom.constants.update(dict(_typed_list(sec[1:])))
        elif key == ":predicates":
            for pred in sec[1:]:
                if not isinstance(pred, list) or not pred or not isinstance(pred[0], str):
                    raise PDDLParseError(f"bad predicate declaration: {unparse(pred)}")
                dom.predicates[pred[0]] = len(_typed_list(pred[1:]))
        elif key == ":action":
            act = _parse_action(sec)
            dom.actions[act.name] = act
        elif key in (":derived", ":durative-action"):
            raise Unsupported(f"{key} is not modelled by the plan simulator")
        elif key == ":functions":
            continue
        else:
            raise PDDLParseError(f"unknown domain section {key}")
    return dom


def _parse_action(sec: list[SExpr]) -> Action:
    if len(sec) < 2 or not isinstance(sec[1], str):
        raise PDDLParseError("(:action needs a name")
    name = sec[1]
    fields_: dict[str, SExpr] = {}
    i = 2
    while i < len(sec):
        key = sec[i]
        if not isinstance(key, str) or not key.startswith(":") or i + 1 >= len(sec):
            raise PDDLParseError(f"action {name}: malformed body near {unparse(key)}")
        fields_[key] = sec[i + 1]
        i += 2
    params = fields_.get(":parameters", [])
    if not isinstance(params, list):
        raise PDDLParseError(f"action {name}: :parameters must be a list")
    precondition = fields_.get(":precondition", ["and"])
    if _mentions(precondition, _NUMERIC_TESTS):
        raise Unsupported(f"action {name}: numeric conditions are not modelled by the plan simulator")
    return Action(name, tuple(_typed_list(params)), precondition, fields_.get(":effect", ["and"]))


_NUMERIC_TESTS = frozenset({"<", ">", "<=", ">="})


def _mentions(expr: SExpr, heads: frozenset[str]) -> bool:
    if isinstance(expr, str) or not expr:
        return False
    if isinstance(expr[0], str) and expr[0] in heads:
        return True
    return any(_mentions(e, heads) for e in expr)


def parse_problem(text: str) -> Problem:
    name, sections = _sections(parse_sexpr(text), "problem")
    prob = Problem(name, "")
    init: set[Atom] = set()
    numeric: list[SExpr] = []
    for sec in sections:
        key = sec[0]
        if key == ":domain":
            prob.domain_name = str(sec[1]) if len(sec) > 1 else ""
        elif key == ":objects":
            prob.objects.update(dict(_typed_list(sec[1:])))
        elif key == ":init":
            for fact in sec[1:]:
                if isinstance(fact, list) and fact and fact[0] == "=":
                    numeric.append(fact)
                elif isinstance(fact, list) and fact and all(isinstance(x, str) for x in fact):
                    init.add(tuple(fact))  # type: ignore[arg-type]
                else:
                    raise PDDLParseError(f"unsupported initial fact {unparse(fact)}")
        elif key == ":goal":
            prob.goal = sec[1] if len(sec) > 1 else ["and"]
        elif key == ":metric":
            prob.metric = sec
        elif key == ":requirements":
            continue
        else:
            raise PDDLParseError(f"unknown problem section {key}")
    prob.init = frozenset(init)
    prob.numeric_init = tuple(numeric)
    return prob


def unparse(expr: SExpr) -> str:
    if isinstance(expr, str):
        return expr
    return "(" + " ".join(unparse(e) for e in expr) + ")"


# --- semantics ------------------------------------------------------------------------------


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
        typed = _typed_list(variables)
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


class NotApplicable(Exception):
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


@functools.lru_cache(maxsize=64)
def load_world(domain_text: str, problem_text: str) -> World:
    """The world of a domain/problem text pair, shared by every caller with the same texts (and so
    are its transitions): read it, never modify it. Parse errors raise each time."""
    return World(_shared_domain(domain_text), _shared_problem(problem_text))


# A loop often changes only one of the two files, and unfaulted domains repeat across episodes.
_shared_domain = functools.lru_cache(maxsize=64)(parse_domain)
_shared_problem = functools.lru_cache(maxsize=256)(parse_problem)

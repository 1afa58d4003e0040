"""PDDL domains and problems as structures, read from text for the plan simulator.

Supports STRIPS, typing, constants, negative preconditions, equality, quantifiers
(forall/exists), disjunction/implication and conditional effects; numeric effects (action
costs) are kept but not modelled. Derived predicates, durative actions, numeric conditions
and nesting deeper than `MAX_DEPTH` raise `Unsupported`, so callers can fall back to
validator-only checking; text that is not PDDL raises `PDDLParseError`. Atoms are lower-cased.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rollout.pddl.printer import unparse
from rollout.pddl.sections import typed_list
from rollout.pddl.sexpr import SExpr, SExprError, TooDeep, Unbalanced, read, tokenize
from solvers.errors import InputError

Atom = tuple[str, ...]  # ("on", "a", "b")

# The simulator walks formulas recursively (a few frames per level): deeper text is refused
# here, as Unsupported, rather than failing with RecursionError in the middle of a search.
MAX_DEPTH = 200


class PDDLParseError(InputError, ValueError):
    """The text is not PDDL this model can read."""


class Unsupported(PDDLParseError):
    """Valid PDDL using a feature the simulator does not model (derived predicates, durative actions)."""


def parse_sexpr(text: str) -> SExpr:
    """The one expression of `text`, atoms lower-cased."""
    tokens = tokenize(text)
    if not tokens:
        raise PDDLParseError("empty PDDL text")
    try:
        expr, end = next(read(tokens, fold_case=True, max_depth=MAX_DEPTH))
    except Unbalanced as exc:
        if exc.unclosed:
            raise PDDLParseError("unexpected end of text: unbalanced parentheses") from None
        raise PDDLParseError("unexpected ')'") from None
    except TooDeep as exc:
        raise Unsupported(f"PDDL {exc} is not modelled by the plan simulator") from None
    if end != len(tokens):
        raise PDDLParseError(f"unexpected text after the closing parenthesis: {' '.join(tokens[end:end + 5])}")
    return expr


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



def strict_typed_list(items: Sequence[SExpr]) -> list[tuple[str, str]]:
    """`typed_list(items, strict=True)` with its errors as PDDLParseError."""
    try:
        return typed_list(items, strict=True)
    except SExprError as exc:
        raise PDDLParseError(str(exc)) from None


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
            for t, parent in strict_typed_list(sec[1:]):
                if t != "object":
                    dom.supertypes[t] = parent
        elif key == ":constants":
            dom.constants.update(dict(strict_typed_list(sec[1:])))
        elif key == ":predicates":
            for pred in sec[1:]:
                if not isinstance(pred, list) or not pred or not isinstance(pred[0], str):
                    raise PDDLParseError(f"bad predicate declaration: {unparse(pred)}")
                dom.predicates[pred[0]] = len(strict_typed_list(pred[1:]))
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
    return Action(name, tuple(strict_typed_list(params)), precondition, fields_.get(":effect", ["and"]))


_NUMERIC_TESTS = frozenset({"<", ">", "<=", ">="})


def _mentions(expr: SExpr, heads: frozenset[str]) -> bool:
    todo = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, str) or not e:
            continue
        if isinstance(e[0], str) and e[0] in heads:
            return True
        todo.extend(e)
    return False


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
            prob.objects.update(dict(strict_typed_list(sec[1:])))
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


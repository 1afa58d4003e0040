"""The one S-expression reader of rollout/ (rollout/pddl/sexpr.py) reads any nesting depth,
and the one typed_list reads both the lenient way (text rewriting) and the strict way (simulator)."""

from __future__ import annotations

import pytest

from rollout.pddl import model
from rollout.pddl.sections import typed_list
from rollout.pddl.sexpr import SExpr, SExprError, Unbalanced, parse, parse_all, read, tokenize
from rollout.pddl.state_space import load_world, simulate


def _depth(expr: SExpr) -> int:
    """Nesting depth, walked without recursion (a recursive walk would itself overflow)."""
    deepest, todo = 0, [(expr, 1)]
    while todo:
        e, level = todo.pop()
        if isinstance(e, list):
            deepest = max(deepest, level)
            todo.extend((child, level + 1) for child in e)
    return deepest


@pytest.mark.parametrize("levels", [5_000, 50_000])
def test_the_reader_reads_deep_nesting_without_recursion(levels: int) -> None:
    text = "(define " + "(and " * levels + "(p)" + ")" * levels + ")"
    tree = parse(text)
    assert tree[0] == "define"
    assert _depth(tree) == levels + 2
    [again] = parse_all(text)
    assert _depth(again) == levels + 2
    with pytest.raises(Unbalanced, match="1 unclosed"):
        parse(text[:-1])


@pytest.mark.parametrize("levels", [5_000, 50_000])
def test_the_simulator_model_refuses_deep_nesting_as_unsupported(levels: int) -> None:
    domain = ("(define (domain d) (:predicates (p)) (:action a :parameters () :precondition "
              + "(and " * levels + "(p)" + ")" * levels + " :effect (p)))")
    with pytest.raises(model.Unsupported, match="deeper than 200 levels"):
        model.parse_domain(domain)


def test_the_simulator_runs_a_formula_as_deep_as_it_accepts() -> None:
    # define, :action and the (and ...) itself: the innermost (p) sits at MAX_DEPTH
    inner = model.MAX_DEPTH - 3
    domain = ("(define (domain d) (:predicates (p) (q)) (:action a :parameters () :precondition "
              + "(and " * inner + "(p)" + ")" * inner + " :effect (q)))")
    problem = "(define (problem x) (:domain d) (:init (p)) (:goal (q)))"
    result = simulate(load_world(domain, problem), [("a", ())])
    assert result.valid and result.executed == 1


def test_the_model_reads_one_expression_and_names_what_follows() -> None:
    with pytest.raises(model.PDDLParseError, match=r"after the closing parenthesis: \) \( b"):
        model.parse_sexpr("(a)) (b")
    with pytest.raises(model.PDDLParseError, match=r"unexpected '\)'"):
        model.parse_sexpr(") (a)")
    with pytest.raises(model.PDDLParseError, match="empty PDDL text"):
        model.parse_sexpr("  ; only a comment")
    assert model.parse_sexpr("(Define (Domain D))") == ["define", ["domain", "d"]]


def test_read_yields_each_top_level_expression_lazily() -> None:
    exprs = read(tokenize("(a B) c (d) )"))
    assert next(exprs) == (["a", "B"], 4)
    assert next(exprs) == ("c", 5)
    assert next(exprs) == (["d"], 8)
    with pytest.raises(Unbalanced, match="unbalanced"):
        next(exprs)
    with pytest.raises(SExprError, match="exactly one"):
        parse("(a) (b)")


def test_typed_list_lenient_and_strict() -> None:
    items = ["a", "b", "-", "t", "c", "-", ["either", "u", "v"], "d"]
    assert typed_list(items) == [("a", "t"), ("b", "t"), ("c", "either u v"), ("d", "object")]
    assert typed_list(items, strict=True) == [("a", "t"), ("b", "t"), ("c", "object"), ("d", "object")]
    assert typed_list(["a", ["x"], "-"]) == [("a", "object"), ("-", "object")]
    with pytest.raises(SExprError, match="unexpected list in a typed list: \\(x\\)"):
        typed_list(["a", ["x"]], strict=True)
    with pytest.raises(SExprError, match="'-' without a type"):
        typed_list(["a", "-"], strict=True)
    with pytest.raises(model.PDDLParseError, match="'-' without a type"):
        model.parse_domain("(define (domain d) (:types a -))")

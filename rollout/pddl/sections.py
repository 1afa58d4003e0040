"""The parts of a parsed `(define ...)`: its sections by keyword and PDDL typed lists."""

from __future__ import annotations

import random
from collections.abc import Sequence

from rollout.pddl.printer import unparse
from rollout.pddl.sexpr import SExpr, SExprError


def section(define: list[SExpr], keyword: str) -> list[SExpr] | None:
    """The first child list of a define whose head is `keyword` (e.g. ':init')."""
    for item in define:
        if isinstance(item, list) and item and isinstance(item[0], str) and item[0].lower() == keyword:
            return item
    return None


def sections(define: list[SExpr], keyword: str) -> list[list[SExpr]]:
    return [item for item in define
            if isinstance(item, list) and item and isinstance(item[0], str) and item[0].lower() == keyword]


def shuffle_init(define: list[SExpr], rng: random.Random) -> None:
    """Shuffle the facts of a problem's :init in place (their order carries no meaning)."""
    init = section(define, ":init")
    if init is not None and len(init) > 2:
        facts = init[1:]
        rng.shuffle(facts)
        init[1:] = facts


PROBLEM_SECTIONS = ("objects", "init", "goal", "metric")


def problem_section_at(problem: str, line: int, column: int | None = None) -> str:
    """The problem section ("objects", "init", "goal", "metric"; "other" before any of them) whose
    text holds 1-based `line` of the problem file, read up to `column` on that line when given:
    the last section opened on or before it (on one line, the later of them in file order)."""
    lines = problem.splitlines()[:line]
    if column is not None and lines:
        lines[-1] = lines[-1][:column]
    current = "other"
    for text in lines:
        lowered = text.lower()
        for key in PROBLEM_SECTIONS:
            if f"(:{key}" in lowered:
                current = key
    return current


def typed_list(items: Sequence[SExpr], *, strict: bool = False) -> list[tuple[str, str]]:
    """Parse `a b - t c - u d` into [(a, t), (b, t), (c, u), (d, object)].

    Lenient (the default, for reading and rewriting text the loop wrote): a list where a name
    belongs is skipped, a trailing '-' is a name, `(either t u)` is named "either t u".
    `strict` (for the plan simulator, which has no union types): those raise SExprError, and
    `(either ...)` is `object`.
    """
    out: list[tuple[str, str]] = []
    pending: list[str] = []
    i = 0
    while i < len(items):
        tok = items[i]
        if tok == "-" and i + 1 < len(items):
            typ = items[i + 1]
            typ_name = typ if isinstance(typ, str) else "object" if strict else " ".join(str(t) for t in typ)
            out.extend((name, typ_name) for name in pending)
            pending = []
            i += 2
            continue
        if isinstance(tok, str):
            if strict and tok == "-":
                raise SExprError("'-' without a type in a typed list")
            pending.append(tok)
        elif strict:
            raise SExprError(f"unexpected list in a typed list: {unparse(tok)}")
        i += 1
    out.extend((name, "object") for name in pending)
    return out

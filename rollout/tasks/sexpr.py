"""A small S-expression reader/printer for PDDL text (comments dropped, case kept)."""

from __future__ import annotations

import functools
import random

SExpr = str | list["SExpr"]


class SExprError(ValueError):
    pass


def tokenize(text: str) -> list[str]:
    """PDDL tokens: parentheses and words, `;` comments dropped."""
    if ";" in text:
        # every line break splitlines() knows is whitespace to split(): joining with "\n" keeps
        # the tokens of each line apart, as tokenizing line by line would
        text = "\n".join([line.split(";", 1)[0] for line in text.splitlines()])
    return text.replace("(", " ( ").replace(")", " ) ").split()


def parse_all(text: str) -> list[SExpr]:
    """Parse every top-level expression in `text`."""
    stack: list[list[SExpr]] = [[]]
    for tok in tokenize(text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                raise SExprError("unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    if len(stack) != 1:
        raise SExprError(f"{len(stack) - 1} unclosed '('")
    return stack[0]


def parse(text: str) -> list[SExpr]:
    exprs = parse_all(text)
    if len(exprs) != 1 or not isinstance(exprs[0], list):
        raise SExprError("expected exactly one (define ...) expression")
    return exprs[0]


@functools.lru_cache(maxsize=1024)
def parse_shared(text: str) -> list[SExpr]:
    """`parse(text)`, one tree per text shared by every caller: read it, never edit it
    (`copy_tree` first); raises SExprError like `parse` (errors are not cached)."""
    return parse(text)


def copy_tree(expr: SExpr) -> SExpr:
    """A copy whose lists can be edited without touching `expr` (strings are shared: immutable)."""
    if isinstance(expr, str):
        return expr
    return [e if isinstance(e, str) else copy_tree(e) for e in expr]


LINE_WIDTH = 100  # a list whose one-line form fits stays on one line


def to_text(expr: SExpr, indent: int = 0) -> str:
    """Print with one top-level section per line block; short lists stay on one line."""
    flat_of: dict[int, str] = {}  # each sublist's one-line form, computed once per call

    def flat(e: list[SExpr]) -> str:
        text = flat_of.get(id(e))
        if text is None:
            text = flat_of[id(e)] = "(" + " ".join([x if isinstance(x, str) else flat(x) for x in e]) + ")"
        return text

    def render(e: SExpr, indent: int) -> str:
        if isinstance(e, str):
            return e
        one_line = flat(e)
        if len(one_line) + indent <= LINE_WIDTH or not e:
            return one_line
        pad = " " * (indent + 2)
        parts = [e[0] if isinstance(e[0], str) else render(e[0], indent + 1)]
        i = 1
        # keep ":keyword value" pairs on one line
        while i < len(e):
            item = e[i]
            if isinstance(item, str) and item.startswith(":") and i + 1 < len(e):
                parts.append(pad + item + " " + render(e[i + 1], indent + 2 + len(item) + 1))
                i += 2
            else:
                parts.append(pad + render(item, indent + 2))
                i += 1
        return "(" + "\n".join(parts) + ")"

    return render(expr, indent)


def join_sections(head: str, section_texts: list[str]) -> str:
    """`to_text([head, *sections])` from each section's `to_text(section, 2)`, for a define whose
    items after the head are all lists (callers can then reuse the text of unchanged sections)."""
    if all("\n" not in text for text in section_texts):
        # every section printed on one line, i.e. as its one-line form: the define may fit too
        one_line = "(" + " ".join([head, *section_texts]) + ")"
        if len(one_line) <= LINE_WIDTH:
            return one_line
    return "(" + "\n  ".join([head, *section_texts]) + ")"


def section(define: list[SExpr], keyword: str) -> list[SExpr] | None:
    """The first child list of a define whose head is `keyword` (e.g. ':init')."""
    for item in define:
        if isinstance(item, list) and item and isinstance(item[0], str) and item[0].lower() == keyword:
            return item
    return None


def shuffle_init(define: list[SExpr], rng: random.Random) -> None:
    """Shuffle the facts of a problem's :init in place (their order carries no meaning)."""
    init = section(define, ":init")
    if init is not None and len(init) > 2:
        facts = init[1:]
        rng.shuffle(facts)
        init[1:] = facts


def sections(define: list[SExpr], keyword: str) -> list[list[SExpr]]:
    return [item for item in define
            if isinstance(item, list) and item and isinstance(item[0], str) and item[0].lower() == keyword]


def typed_list(items: list[SExpr]) -> list[tuple[str, str]]:
    """Parse `a b - t c - u d` into [(a, t), (b, t), (c, u), (d, object)]."""
    out: list[tuple[str, str]] = []
    pending: list[str] = []
    i = 0
    while i < len(items):
        tok = items[i]
        if tok == "-" and i + 1 < len(items):
            typ = items[i + 1]
            typ_name = typ if isinstance(typ, str) else " ".join(str(t) for t in typ)
            out.extend((name, typ_name) for name in pending)
            pending = []
            i += 2
            continue
        if isinstance(tok, str):
            pending.append(tok)
        i += 1
    out.extend((name, "object") for name in pending)
    return out

"""The S-expression reader for PDDL text: tokens, nested lists of strings, comments dropped.

It is iterative (an explicit stack, no recursion), so any nesting depth reads; case is kept
unless `fold_case` asks for lower-cased atoms. Errors are `SExprError` (a ValueError);
`Unbalanced` says which parenthesis is missing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

from solvers.errors import InputError

SExpr = str | list["SExpr"]


class SExprError(InputError, ValueError):
    pass


class Unbalanced(SExprError):
    """`unclosed` '(' were never closed (0: a ')' closed nothing)."""

    def __init__(self, unclosed: int) -> None:
        super().__init__(f"{unclosed} unclosed '('" if unclosed else "unbalanced ')'")
        self.unclosed = unclosed


class TooDeep(SExprError):
    """The text nests deeper than the caller's `max_depth`."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(f"nested deeper than {max_depth} levels")
        self.max_depth = max_depth


def tokenize(text: str) -> list[str]:
    """PDDL tokens: parentheses and words, `;` comments dropped."""
    if ";" in text:
        # every line break splitlines() knows is whitespace to split(): joining with "\n" keeps
        # the tokens of each line apart, as tokenizing line by line would
        text = "\n".join([line.split(";", 1)[0] for line in text.splitlines()])
    return text.replace("(", " ( ").replace(")", " ) ").split()


def read(tokens: Sequence[str], *, fold_case: bool = False,
         max_depth: int | None = None) -> Iterator[tuple[SExpr, int]]:
    """Each top-level expression of `tokens` with the index of the token after it, one at a
    time (a caller that wants only the first reads no further); raises `Unbalanced` or `TooDeep`."""
    stack: list[list[SExpr]] = []
    for i, tok in enumerate(tokens):
        if tok == "(":
            if max_depth is not None and len(stack) >= max_depth:
                raise TooDeep(max_depth)
            stack.append([])
        elif tok == ")":
            if not stack:
                raise Unbalanced(0)
            done = stack.pop()
            if stack:
                stack[-1].append(done)
            else:
                yield done, i + 1
        elif stack:
            stack[-1].append(tok.lower() if fold_case else tok)
        else:
            yield (tok.lower() if fold_case else tok), i + 1
    if stack:
        raise Unbalanced(len(stack))


def parse_all(text: str) -> list[SExpr]:
    """Parse every top-level expression in `text`."""
    return [expr for expr, _ in read(tokenize(text))]


def parse(text: str) -> list[SExpr]:
    exprs = parse_all(text)
    if len(exprs) != 1 or not isinstance(exprs[0], list):
        raise SExprError("expected exactly one (define ...) expression")
    return exprs[0]


@functools.lru_cache(maxsize=8192)
def parse_shared(text: str) -> list[SExpr]:
    """`parse(text)`, one tree per text shared by every caller: read it, never edit it
    (`copy_tree` first); raises SExprError like `parse` (errors are not cached)."""
    return parse(text)


def copy_tree(expr: SExpr) -> SExpr:
    """A copy whose lists can be edited without touching `expr` (strings are shared: immutable)."""
    if isinstance(expr, str):
        return expr
    return [e if isinstance(e, str) else copy_tree(e) for e in expr]

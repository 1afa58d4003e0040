"""S-expression trees back to PDDL text: `to_text` (one section per line block, short lists
on one line), `join_sections` (a define from already printed sections) and `unparse` (one line)."""

from __future__ import annotations

from rollout.pddl.sexpr import SExpr

LINE_WIDTH = 100  # a list whose one-line form fits stays on one line


def unparse(expr: SExpr) -> str:
    """The one-line form of `expr`."""
    if isinstance(expr, str):
        return expr
    return "(" + " ".join(unparse(e) for e in expr) + ")"


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

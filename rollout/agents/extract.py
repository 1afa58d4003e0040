"""Pulling PDDL, solution outlines and instructions out of free-form LLM replies.

Accepted, in order of preference: `<domain>`/`<problem>` tags (their content may itself be
fenced), fenced code blocks (```pddl / ```lisp / ```), and bare `(define (domain ...` forms in
the prose. A form is classified by its head, `(define (domain` or `(define (problem`, not by the
tag or fence it came in. Anything that is missing or has unbalanced parentheses raises
`ExtractionError` with a message fit for a trace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solvers.errors import HaloError

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_DEFINE_RE = re.compile(r"\(\s*define\s*\(\s*(domain|problem)\b", re.IGNORECASE)


class ExtractionError(HaloError, ValueError):
    """The reply does not hold the requested artefact in a usable form."""


@dataclass(frozen=True)
class ExtractedPDDL:
    domain: str | None
    problem: str | None


def _tag_bodies(reply: str, tag: str) -> list[str]:
    """Contents of <tag>...</tag>; an unclosed last tag runs to the end of the reply."""
    pattern = re.compile(rf"<\s*{tag}\s*>(.*?)(?:<\s*/\s*{tag}\s*>|\Z)", re.DOTALL | re.IGNORECASE)
    return [m.group(1) for m in pattern.finditer(reply)]


def _strip_fences(text: str) -> str:
    fences = _FENCE_RE.findall(text)
    if fences:
        return "\n".join(body for _, body in fences)
    return text


def _balanced_form(text: str, start: int) -> tuple[str, int]:
    """The s-expression beginning at text[start] == '(' and where it ends; comments and strings skipped."""
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch == ";":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if ch == '"':
            close = text.find('"', i + 1)
            i = n if close < 0 else close + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return text[start:i + 1], i + 1
        i += 1
    raise ExtractionError(f"unbalanced parentheses: {depth} '(' never closed")


def _forms(text: str) -> dict[str, list[str]]:
    """All complete (define (domain|problem ...)) forms in `text`, by kind."""
    found: dict[str, list[str]] = {"domain": [], "problem": []}
    pos = 0
    while True:
        m = _DEFINE_RE.search(text, pos)
        if not m:
            return found
        form, end = _balanced_form(text, m.start())
        found[m.group(1).lower()].append(form.strip())
        pos = end


def _from_source(source: str, kind: str, where: str) -> str | None:
    try:
        forms = _forms(source)
    except ExtractionError as exc:
        raise ExtractionError(f"{kind} in {where}: {exc}") from None
    return forms[kind][0] if forms[kind] else None


def extract_pddl(reply: str, *, required: tuple[str, ...] = ("domain", "problem")) -> ExtractedPDDL:
    """The domain and problem in `reply`; kinds in `required` must be present."""
    if not reply or not reply.strip():
        raise ExtractionError("the reply is empty")
    found: dict[str, str | None] = {"domain": None, "problem": None}
    for kind in ("domain", "problem"):
        for body in _tag_bodies(reply, kind):
            text = _strip_fences(body)
            form = _from_source(text, kind, f"<{kind}> tag")
            if form is None:  # e.g. the problem placed in the domain tag: look at the other kind too
                other = "problem" if kind == "domain" else "domain"
                if found[other] is None:
                    found[other] = _from_source(text, other, f"<{kind}> tag")
                continue
            found[kind] = found[kind] or form
    missing = [k for k in ("domain", "problem") if found[k] is None]
    if missing:
        for lang, body in _FENCE_RE.findall(reply):
            for kind in list(missing):
                form = _from_source(body, kind, f"```{lang or ''} block")
                if form is not None:
                    found[kind] = form
                    missing.remove(kind)
    if missing:
        prose = re.sub(r"<\s*/?\s*(domain|problem)\s*>", " ", reply, flags=re.IGNORECASE)
        for kind in list(missing):
            form = _from_source(prose, kind, "the reply")
            if form is not None:
                found[kind] = form
                missing.remove(kind)
    absent = [k for k in required if found[k] is None]
    if absent:
        what = " and ".join(absent)
        hint = "no <domain>/<problem> tags, fenced PDDL or (define ...) forms" if len(absent) == 2 else \
            f"no (define ({absent[0]} ...)) form"
        raise ExtractionError(f"the reply holds no {what} ({hint}); reply starts: {reply.strip()[:80]!r}")
    if found["domain"] is None and found["problem"] is None:
        raise ExtractionError(f"the reply holds no PDDL; reply starts: {reply.strip()[:80]!r}")
    return ExtractedPDDL(found["domain"], found["problem"])


def extract_tagged_text(reply: str, tag: str) -> str:
    """The text between <tag> and </tag> (fences removed); missing or empty -> ExtractionError."""
    bodies = _tag_bodies(reply or "", tag)
    if not bodies:
        raise ExtractionError(f"the reply has no <{tag}> section; reply starts: {(reply or '').strip()[:80]!r}")
    text = _strip_fences(bodies[0]).strip()
    if not text:
        raise ExtractionError(f"the <{tag}> section is empty")
    return text

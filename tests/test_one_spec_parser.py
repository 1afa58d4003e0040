"""One reader of `key=value` text: solvers/params.py. No other module of the packages splits text
on "=" (a hand-written `key=value` parser), except the few entries of ALLOWED, each with its reason.

The check reads the AST: a call of .split / .rsplit / .partition / .rpartition / .index / .find
/ .rfind with "=" (or "!=") as an argument. An allowed entry that no longer matches fails too, so
the list cannot go stale."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("solvers", "rollout", "train", "serve", "cluster", "benchmarks")
PARSER = "solvers/params.py"
_METHODS = {"split", "rsplit", "partition", "rpartition", "index", "find", "rfind"}
_SEPARATORS = {"=", "!="}

# (file, function) -> why it is not a spec parser
ALLOWED: dict[tuple[str, str], str] = {
    ("solvers/locate.py", "fd_version"): "reads `__version__ = \"...\"` out of Fast Downward's own Python source",
    ("serve/keys.py", "parse_entry"): "an API key entry `NAME=KEY`: the key's text must never reach an error "
                                       "message, and the one parser quotes the spec it refuses",
}


def splits_on_equals(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, enclosing function) of each call that splits text on "="."""
    tree = ast.parse(source, filename=filename)
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr in _METHODS
                    and any(isinstance(a, ast.Constant) and a.value in _SEPARATORS for a in child.args)):
                found.append((child.lineno, function))
            visit(child, name)

    visit(tree, "<module>")
    return found


def _package_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _hits() -> dict[tuple[str, str], list[int]]:
    hits: dict[tuple[str, str], list[int]] = {}
    for path in _package_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel == PARSER:
            continue
        for line, function in splits_on_equals(path.read_text(), rel):
            hits.setdefault((rel, function), []).append(line)
    return hits


def test_no_hand_written_key_value_parser_outside_the_one_parser() -> None:
    outside = {f"{file}:{lines[0]} ({function})": lines for (file, function), lines in _hits().items()
               if (file, function) not in ALLOWED}
    assert outside == {}, ("split key=value text with solvers.params (read_params / read_pairs), not by hand: "
                           f"{sorted(outside)}")


def test_every_allowed_entry_still_exists() -> None:
    stale = sorted(set(ALLOWED) - set(_hits()))
    assert stale == [], f"ALLOWED entries that no longer split on '=' (remove them): {stale}"


def test_the_one_parser_is_where_the_splitting_is() -> None:
    assert splits_on_equals((ROOT / PARSER).read_text()), "solvers/params.py no longer splits on '='?"


@pytest.mark.parametrize("source", [
    "def f(text):\n    return dict(p.split('=', 1) for p in text.split(','))\n",
    "def f(part):\n    key, sep, value = part.partition('=')\n",
    "def f(part):\n    key, _, value = part.strip().rpartition('!=')\n",
    "async def g(x):\n    return x[: x.index('=')]\n",
    "def f(s):\n    return str.partition(s, '=')\n",
])
def test_the_checker_catches_a_hand_written_parser(source: str) -> None:
    assert splits_on_equals(source), source


@pytest.mark.parametrize("source", [
    "def f(text):\n    return text.split(',')\n",
    "def f(text):\n    return '=' in text\n",
    "def f(text):\n    return text.split('PORTFOLIOS = {}', 1)\n",
])
def test_the_checker_passes_other_splits(source: str) -> None:
    assert splits_on_equals(source) == [], source

"""No function in the packages is longer than a screen (60 lines, its signature and decorators
included); tests and benchmarks aside. The checker reads each module's AST, so it is tested on
synthetic sources too (a long function is found, nested and async ones as well)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("solvers", "rollout", "train", "serve", "cluster")
MAX_LINES = 60

# "path:qualified name" -> why it stays long. Keep it short; every entry needs its reason.
ALLOWED: dict[str, str] = {}


def long_functions(source: str, path: str = "<source>", limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(path:qualified name, lines) of every function or method in `source` longer than `limit`."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                lines = (child.end_lineno or child.lineno) - start + 1
                if lines > limit:
                    found.append((f"{path}:{name}", lines))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def package_modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_no_function_in_the_packages_is_longer_than_60_lines() -> None:
    too_long = []
    for path in package_modules():
        rel = path.relative_to(ROOT).as_posix()
        too_long += [(name, n) for name, n in long_functions(path.read_text(), rel) if name not in ALLOWED]
    assert not too_long, "functions over 60 lines (split them, or allow one with its reason): " + ", ".join(
        f"{name} ({n})" for name, n in too_long)


def test_every_allowed_entry_still_exists_and_is_still_long() -> None:
    """An entry that is no longer needed goes, so the list cannot silently grow stale."""
    found = {name for path in package_modules()
             for name, _ in long_functions(path.read_text(), path.relative_to(ROOT).as_posix())}
    assert set(ALLOWED) <= found, f"allowed but not long (remove them): {sorted(set(ALLOWED) - found)}"
    assert all(reason.strip() for reason in ALLOWED.values())


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}def {name}() -> None:\n{body}"


@pytest.mark.parametrize("body_lines, flagged", [(59, False), (60, True), (200, True)])
def test_the_checker_counts_signature_and_body(body_lines: int, flagged: bool) -> None:
    """59 body lines + the def line = 60 (allowed); one more is too long."""
    found = long_functions(_function("f", body_lines), "m.py")
    assert found == ([("m.py:f", body_lines + 1)] if flagged else [])


def test_the_checker_finds_methods_nested_async_and_decorated_functions() -> None:
    method = "class C:\n" + _function("m", 70, indent="    ")
    nested = "def outer() -> None:\n" + _function("inner", 70, indent="    ")
    coroutine = _function("g", 70).replace("def g", "async def g")
    decorated = "@decorator\n@other(\n    1,\n)\n" + _function("d", 57)  # 4 decorator lines + 58 = 62
    assert long_functions(method, "m.py") == [("m.py:C.m", 71)]
    assert long_functions(nested, "m.py") == [("m.py:outer", 72), ("m.py:outer.inner", 71)]
    assert long_functions(coroutine, "m.py") == [("m.py:g", 71)]
    assert long_functions(decorated, "m.py") == [("m.py:d", 62)]


def test_a_synthetic_long_function_in_a_package_fails_the_check(tmp_path: Path) -> None:
    """The check over a tree: a module with one long function among short ones is reported."""
    pkg = tmp_path / "solvers"
    pkg.mkdir()
    (pkg / "short.py").write_text(_function("fine", 10))
    (pkg / "long.py").write_text(_function("fine", 3) + "\n\n" + _function("too_long", 61))
    found = [hit for p in sorted(pkg.rglob("*.py"))
             for hit in long_functions(p.read_text(), p.relative_to(tmp_path).as_posix())]
    assert found == [("solvers/long.py:too_long", 62)]

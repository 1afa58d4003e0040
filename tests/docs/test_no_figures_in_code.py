"""No comment or docstring in the packages carries a dated run or a measured figure: those live in
docs/results/ (one dated file per measurement, with its command); the code keeps the reason."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("solvers", "rollout", "train", "serve", "cluster")
UNIT = r"(?:ms|us|s|%|x|KB|MB|GB|CPU-s|episodes/s|requests/s|rows/s)"
FIGURE = re.compile(
    r"(?<![\w/-])20\d\d-\d\d-\d\d\b"              # a dated run (a results file's name is a pointer)
    rf"|~\s?\d[\d.,]*\s?{UNIT}\b"                # ~12 ms, ~9x
    rf"|\babout \d[\d.,]*\s?{UNIT}\b"            # about 1.5 ms
    r"|\b\d[\d.,]*\s?ms p(?:50|90|99)\b"         # 1.6 ms p50
    r"|\bmeasured (?:here|on this|with a)\b"     # measured here
    r"|\b(?:was|were) \d[\d.,]*\s?" + UNIT + r"\b"  # was 3.2 s
)


def _texts(path: Path) -> list[tuple[int, str]]:
    source = path.read_text()
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out += [(node.body[0].lineno + i, line) for i, line in enumerate(doc.splitlines())]
    return out


def figures_in(path: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line}: {text.strip()}" for line, text in _texts(path)
            if FIGURE.search(text)]


def test_no_measured_figure_in_code_comments_or_docstrings() -> None:
    found = [hit for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             for hit in figures_in(path)]
    assert not found, "move these figures to docs/results/ and keep the reason:\n" + "\n".join(found)


def test_the_check_sees_a_figure(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text('"""Fast: ~12 ms per call (measured here, 2026-12-01)."""\n# about 1.5 ms\n'
                      '# see docs/results/2026-12-03-x.md; 3 retries, ~4 characters per token\nx = 1\n')
    assert sorted(line for line, text in _texts(sample) if FIGURE.search(text)) == [1, 2]

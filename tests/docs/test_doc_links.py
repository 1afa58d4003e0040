"""Every relative link in README.md and docs/ (results included) points at a file that exists and,
with a #fragment, at a heading that file has (GitHub's anchor rules), so moving a measurement
to docs/results/ cannot leave a guide pointing nowhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    out = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            out.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            out.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return out


def test_every_relative_link_resolves() -> None:
    broken = [b for page in PAGES for b in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# A title, here\n[ok](#a-title-here) [gone](nowhere.md) [bad](#no-such)\n")
    assert [b.split(": ", 1)[1] for b in broken_links(page, tmp_path)] == [
        "nowhere.md (no such file)", "#no-such (no such heading)"]


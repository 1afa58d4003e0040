"""Print the requirements of one optional-dependency group of pyproject.toml, one per line.

Used by the image builds so the images install exactly the pins the project declares:
`python extra_pins.py ml --without torch` -> transformers==..., peft==..., bitsandbytes==..., ...
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower()


def extra_requirements(pyproject: Path, extra: str, without: set[str]) -> list[str]:
    data = tomllib.loads(pyproject.read_text())
    groups = data["project"].get("optional-dependencies", {})
    if extra not in groups:
        raise SystemExit(f"pyproject.toml has no optional-dependencies group {extra!r} (have: {sorted(groups)})")
    return [r for r in groups[extra] if requirement_name(r) not in without]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("extra")
    parser.add_argument("--without", action="append", default=[], help="package name to leave out")
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"))
    args = parser.parse_args(argv)
    for requirement in extra_requirements(args.pyproject, args.extra, {w.lower() for w in args.without}):
        print(requirement)
    return 0


if __name__ == "__main__":
    sys.exit(main())

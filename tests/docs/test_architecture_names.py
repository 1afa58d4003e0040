"""Every `module:attribute` name docs/architecture.md's walkthroughs give exists in the code, so a
rename that leaves the page behind fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
NAME = re.compile(r"`((?:solvers|rollout|train|serve|cluster)(?:\.\w+)*):(\w+(?:\.\w+)*)`")


def names() -> list[tuple[str, str]]:
    return NAME.findall(PAGE.read_text())


def test_the_walkthroughs_name_the_code() -> None:
    found = names()
    assert len(found) >= 25  # both walkthroughs, one episode and one decision
    modules = {module.split(".")[0] for module, _ in found}
    assert {"cluster", "rollout", "solvers", "serve"} <= modules


@pytest.mark.parametrize("module, attribute", names())
def test_named_code_exists(module: str, attribute: str) -> None:
    obj = importlib.import_module(module)
    for part in attribute.split("."):
        obj = getattr(obj, "func_or_class", obj)  # a Ray Serve deployment: the class it wraps
        assert hasattr(obj, part), f"docs/architecture.md names {module}:{attribute}, but {part!r} is not there"
        obj = getattr(obj, part)

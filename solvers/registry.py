"""One registry shape for every extension point (policies, task sources, trained policy classes,
agents, planners).

A name maps to the thing itself or to a "module:attr" string that is imported on first use, so
a lower layer can list an entry whose code lives in a higher one without importing it, and an
extension is one file plus one `register(...)` line. Entries may carry metadata (for example
whether a trained policy decides inline). This module sits in the bottom layer so every layer
can use it; it imports nothing of the project.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from solvers.errors import InputError

T = TypeVar("T")


class UnknownName(InputError, ValueError):
    """A name no one registered, or a "module:attr" target that cannot be imported."""


@dataclass
class _Entry(Generic[T]):
    target: T | str
    meta: dict[str, Any] = field(default_factory=dict)


def load_attr(target: str) -> Any:
    """Import "package.module:attr" (attr may be dotted) and return the attribute."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UnknownName(f"{target!r} must look like 'package.module:attr'")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise UnknownName(f"{target} could not be loaded: {exc}") from exc
    return obj


class Registry(Generic[T]):
    """Names to things of one kind; `kind` words the error messages ("policy", "planner")."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, _Entry[T]] = {}

    def register(self, name: str, target: T | str, **meta: Any) -> None:
        """Add or replace `name`. A str target is "module:attr", imported when first asked for."""
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.kind} needs a non-empty name")
        self._entries[name] = _Entry(target, dict(meta))

    def get(self, name: str) -> T:
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownName(f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or 'none'}")
        if isinstance(entry.target, str):
            try:
                entry.target = load_attr(entry.target)
            except UnknownName as exc:
                raise UnknownName(f"{self.kind} {name!r}: {exc}") from exc
        return entry.target  # type: ignore[return-value]

    def meta(self, name: str) -> dict[str, Any]:
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownName(f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or 'none'}")
        return dict(entry.meta)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def unregister(self, name: str) -> None:
        """Remove `name` (tests that register a throw-away entry clean up with this)."""
        self._entries.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

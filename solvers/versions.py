"""Versions of the planners, validators and runtime, for `halo doctor` and trajectory records.

Every registered planner and validator (solvers.planners.PLANNERS) that is installed appears
under its label, so one registered after start-up is listed too."""

from __future__ import annotations

import functools
import platform

from solvers import locate
from solvers.planners import PLANNERS
from solvers.sandbox import sandbox_level


@functools.lru_cache(maxsize=32)
def _planner_version(name: str) -> tuple[str, str] | None:
    """(label, version) of one registered planner; cached: asking runs its program."""
    planner = PLANNERS.get(name)
    version = planner.version()
    return (planner.label, version) if version is not None else None


@functools.lru_cache(maxsize=1)
def _runtime() -> tuple[str, str, str | None, str | None]:
    return platform.python_version(), sandbox_level(), locate_bwrap_version(), locate.dist_version("ray")


def versions() -> dict[str, str]:
    """Name -> version of everything a plan or verdict depends on. Missing tools are absent."""
    python, sandbox, bwrap, ray = _runtime()
    found: dict[str, str] = {"python": python, "sandbox": sandbox}
    for name in PLANNERS.names():
        entry = _planner_version(name)
        if entry is not None:
            found[entry[0]] = entry[1]
    if bwrap:
        found["bwrap"] = bwrap
    if ray:
        found["ray"] = ray
    return found


def locate_bwrap_version() -> str | None:
    from solvers.sandbox import bwrap_path

    path = bwrap_path()
    if path is None:
        return None
    line = locate.first_line([path, "--version"])
    return line.removeprefix("bubblewrap ").strip() if line else "unknown"

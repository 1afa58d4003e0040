"""Versions of the planners, validators and runtime, for `halo doctor` and trajectory records."""

from __future__ import annotations

import functools
import platform
import subprocess
from importlib import metadata

from solvers import locate
from solvers.sandbox import sandbox_level


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _first_line(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (proc.stdout or proc.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0][:120] if text else None


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Name -> version of everything a plan or verdict depends on. Missing tools are absent."""
    found: dict[str, str] = {"python": platform.python_version(), "sandbox": sandbox_level()}
    if locate.fd_root() is not None:
        found["fast-downward"] = f"{locate.fd_version()} (up-fast-downward {_dist_version('up-fast-downward')})"
    kairos = locate.kairos_binary()
    if kairos is not None:
        line = _first_line([str(kairos), "--version"]) or ""
        found["kairos"] = line.removeprefix("kairos ").strip() or (_dist_version("kairos-planner") or "unknown")
    popf = locate.popf_binary()
    if popf is not None:
        found["popf"] = str(popf)
    val = locate.val_binary()
    if val is not None:
        found["val"] = _first_line([str(val)]) or str(val)
    bwrap = locate_bwrap_version()
    if bwrap:
        found["bwrap"] = bwrap
    ray = _dist_version("ray")
    if ray:
        found["ray"] = ray
    return found


def locate_bwrap_version() -> str | None:
    from solvers.sandbox import bwrap_path

    path = bwrap_path()
    if path is None:
        return None
    line = _first_line([path, "--version"])
    return line.removeprefix("bubblewrap ").strip() if line else "unknown"

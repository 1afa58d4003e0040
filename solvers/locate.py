"""Where the planner and validator programs are on this machine, and what versions they report."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path


@functools.lru_cache(maxsize=1)
def fd_root() -> Path | None:
    """The `downward/` folder of the up-fast-downward wheel. `import up_fast_downward` needs
    unified_planning, so the files are found without importing the package."""
    try:
        spec = find_spec("up_fast_downward")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    # Resolved: the sandbox binds the real path, which a symlinked venv would hide.
    root = (Path(list(spec.submodule_search_locations)[0]) / "downward").resolve()
    return root if (root / "builds" / "release" / "bin" / "downward").exists() else None


def fd_bin() -> Path | None:
    root = fd_root()
    return root / "builds" / "release" / "bin" if root else None


def fd_search_binary() -> Path | None:
    binary = fd_bin()
    return binary / "downward" if binary else None


def fd_driver() -> Path | None:
    root = fd_root()
    return root / "fast-downward.py" if root else None


@functools.lru_cache(maxsize=1)
def fd_version() -> str | None:
    root = fd_root()
    if root is None:
        return None
    text = (root / "driver" / "version.py").read_text()
    for line in text.splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return None


def _which(*names: str) -> Path | None:
    """The first of `names` on PATH. Asked on every solver call, so answers are cached per PATH."""
    return _which_on(names, os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=64)
def _which_on(names: tuple[str, ...], path: str) -> Path | None:
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return Path(found).resolve()
    return None


def kairos_binary() -> Path | None:
    return _kairos_binary(sys.executable, os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def _kairos_binary(executable: str, path: str) -> Path | None:
    beside = Path(executable).with_name("kairos")
    if beside.exists():
        return beside.resolve()
    return _which_on(("kairos",), path)


def popf_binary() -> Path | None:
    return _which("popf", "popf3")


def val_binary() -> Path | None:
    return _which("Validate", "validate")


def dist_version(name: str) -> str | None:
    """The installed version of a Python distribution, None when it is not installed."""
    from importlib import metadata  # imports a one-shot `halo solve` does not need

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def first_line(argv: list[str]) -> str | None:
    """The first line a program prints (its version banner), None when it cannot run."""
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (proc.stdout or proc.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0][:120] if text else None

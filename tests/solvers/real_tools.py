"""The real POPF and VAL builds of ../shared/planners/bin (see its README), for the tests that run
them. Without them those tests skip and say why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import solvers

# HALO_TEST_PLANNERS_BIN points elsewhere (a path that does not exist: run as a checkout without ../shared).
SHARED_BIN = Path(os.environ.get("HALO_TEST_PLANNERS_BIN")
                  or Path(__file__).resolve().parents[2].parent / "shared" / "planners" / "bin")


def real_bin() -> Path | None:
    """The folder holding the real `Validate` and `popf`: ../shared/planners/bin, or PATH's."""
    if (SHARED_BIN / "Validate").exists():
        return SHARED_BIN
    found = shutil.which("Validate")
    return Path(found).resolve().parent if found else None


def missing_libraries(binary: Path) -> str:
    """The libraries the loader cannot find for `binary` ("" when none are missing)."""
    try:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return ", ".join(line.split()[0] for line in out.splitlines() if "not found" in line)


def use_real_tools(monkeypatch: pytest.MonkeyPatch, need_popf: bool = False) -> Path:
    """Put the real tools first on PATH (fresh workers bind them), or skip saying what is missing."""
    found = real_bin()
    if found is None:
        pytest.skip(f"real VAL not found (neither {SHARED_BIN} nor `Validate` on PATH)")
    if need_popf:
        if not (found / "popf").exists():
            pytest.skip(f"real POPF not found in {found}")
        missing = missing_libraries(found / "popf")
        if missing:
            pytest.skip(f"POPF's libraries are not installed ({missing}): apt-get install -y coinor-libcbc3")
    monkeypatch.setenv("PATH", f"{found}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("HALO_VALIDATOR", raising=False)
    monkeypatch.delenv("HALO_TEMPORAL_PLANNER", raising=False)
    solvers.shutdown()  # workers started before bind what was on PATH then
    return found

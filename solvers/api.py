"""Public entry points of `solvers/`: plan and validate PDDL given as text.

Everything above `solvers/` calls only these two functions (plus the result types), so the
sandbox and worker machinery underneath can change freely.

NOTE (bootstrap): this first version shells out to the stock drivers without a sandbox; the
sandboxed, pre-imported worker path replaces the internals behind the same signatures.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Literal

from solvers.results import ErrorCategory, PlanResult, PlanStep, ValidationResult

PlannerName = Literal["fd", "temporal"]


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    memory_mb: int = 2048
    output_bytes: int = 1_000_000


def _fd_driver() -> Path:
    spec = find_spec("up_fast_downward")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("Fast Downward not found: pip install up-fast-downward")
    return Path(list(spec.submodule_search_locations)[0]) / "downward" / "fast-downward.py"


def _kairos() -> str:
    exe = Path(sys.executable).with_name("kairos")
    return str(exe) if exe.exists() else "kairos"


_STEP_RE = re.compile(r"^\s*(?:(?P<start>[0-9.]+)\s*:\s*)?\((?P<body>[^()]*)\)\s*(?:\[(?P<dur>[0-9.]+)\])?")


def parse_plan(text: str) -> list[PlanStep]:
    steps = []
    for line in text.splitlines():
        line = line.split(";", 1)[0].strip()
        if not line:
            continue
        m = _STEP_RE.match(line)
        if not m:
            raise ValueError(f"not a plan step: {line!r}")
        name, *args = m.group("body").lower().split()
        steps.append(
            PlanStep(
                name,
                tuple(args),
                float(m.group("start")) if m.group("start") else None,
                float(m.group("dur")) if m.group("dur") else None,
            )
        )
    return steps


def plan(domain: str, problem: str, *, planner: PlannerName = "fd", search: str | None = None,
         alias: str = "lama-first", limits: Limits = Limits()) -> PlanResult:
    with tempfile.TemporaryDirectory(prefix="halo-plan-") as tmp:
        d, p, out = Path(tmp, "domain.pddl"), Path(tmp, "problem.pddl"), Path(tmp, "plan.txt")
        d.write_text(domain)
        p.write_text(problem)
        if planner == "fd":
            argv = [sys.executable, str(_fd_driver())]
            argv += ["--search", search] if search else ["--alias", alias]
            argv = argv[:2] + ["--plan-file", str(out)] + argv[2:4] + [str(d), str(p)]
            if search:
                argv = [sys.executable, str(_fd_driver()), "--plan-file", str(out), str(d), str(p),
                        "--search", search]
        else:
            argv = [_kairos(), "solve", str(d), str(p), "--no-anytime", "--threads", "1",
                    "--timeout", str(limits.timeout_s), "--output", str(out)]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, cwd=tmp, capture_output=True, text=True,
                                  timeout=limits.timeout_s + 1, env={"PATH": os.environ.get("PATH", "")})
        except subprocess.TimeoutExpired:
            return PlanResult(ErrorCategory.SEARCH_TIMEOUT, planner, wall_s=time.monotonic() - t0)
        tail = (proc.stdout + proc.stderr)[-2000:]
        wall = time.monotonic() - t0
        plan_file = out if out.exists() else Path(str(out) + ".1")
        if proc.returncode == 0 and plan_file.exists():
            steps = parse_plan(plan_file.read_text())
            return PlanResult(ErrorCategory.OK, planner, steps, float(len(steps)), output_tail=tail, wall_s=wall)
        category = ErrorCategory.SOLVER_CRASH
        if proc.returncode in (11, 12):
            category = ErrorCategory.UNSOLVABLE_PROVED
        return PlanResult(category, planner, output_tail=tail, wall_s=wall)


_DIAG_RE = re.compile(r"\[(?P<code>[a-z_]+\.[a-z_]+)\]")


def validate(domain: str, problem: str, plan_text: str, *, limits: Limits = Limits()) -> ValidationResult:
    with tempfile.TemporaryDirectory(prefix="halo-val-") as tmp:
        paths = []
        for name, text in (("domain.pddl", domain), ("problem.pddl", problem), ("plan.txt", plan_text)):
            Path(tmp, name).write_text(text)
            paths.append(str(Path(tmp, name)))
        t0 = time.monotonic()
        proc = subprocess.run([_kairos(), "validate", *paths], cwd=tmp, capture_output=True, text=True,
                              timeout=limits.timeout_s)
        out = proc.stdout + proc.stderr
        codes = _DIAG_RE.findall(out)
        wall = time.monotonic() - t0
        if proc.returncode == 0:
            return ValidationResult(ErrorCategory.OK, "kairos", valid=True, output_tail=out[-2000:],
                                    wall_s=wall, diagnostics=codes)
        category = ErrorCategory.PLAN_INVALID
        if any(c.startswith("parse.") for c in codes):
            category = ErrorCategory.PARSE_ERROR_DOMAIN
            if "problem.pddl" in out:
                category = ErrorCategory.PARSE_ERROR_PROBLEM
            elif "plan.txt" in out:
                category = ErrorCategory.PARSE_ERROR_PLAN
        return ValidationResult(category, "kairos", output_tail=out[-2000:], wall_s=wall, diagnostics=codes)

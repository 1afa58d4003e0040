"""Deterministic repair agents: candidate scoring in the PDDL simulator vs the real validator.

The agents score many candidate plans per call; this measures both scorers on the same
candidates in one run and prints the speed ratio, plus the agents' latency on crafted cases.

    python benchmarks/plan_repair.py [--candidates 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import solvers  # noqa: E402
from rollout.agents.base import AgentContext, make_agent  # noqa: E402
from rollout.agents.plan_search import SimEvaluator, ValidatorEvaluator  # noqa: E402
from rollout.core.state import EpisodeState  # noqa: E402
from rollout.pddl.state_space import load_world  # noqa: E402
from rollout.tasks.base import Task  # noqa: E402

FIX = ROOT / "tests" / "rollout_llm" / "fixtures"


def candidates(plan: list[tuple[str, tuple[str, ...]]], n: int, rng: random.Random):
    out = []
    for _ in range(n):
        cand = list(plan)
        i, j = rng.randrange(len(cand)), rng.randrange(len(cand))
        cand[i], cand[j] = cand[j], cand[i]
        out.append(cand)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=int, default=60)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()
    domain, problem = (FIX / "logistics-domain.pddl").read_text(), (FIX / "logistics-4-0.pddl").read_text()
    gold = solvers.plan(domain, problem).plan
    plan = [(s.name, tuple(s.args)) for s in gold]
    cands = candidates(plan, args.candidates, random.Random(0))

    sim = SimEvaluator(10**6, world=load_world(domain, problem))
    val = ValidatorEvaluator(10**6, domain=domain, problem=problem)
    t0 = time.perf_counter()
    sim_verdicts = [sim.evaluate(c).valid for c in cands]
    t_sim = time.perf_counter() - t0
    t0 = time.perf_counter()
    val_verdicts = [val.evaluate(c).valid for c in cands]
    t_val = time.perf_counter() - t0
    agree = sum(a == b for a, b in zip(sim_verdicts, val_verdicts, strict=True))
    print(f"candidates: {len(cands)} (logistics-4-0, {len(plan)} steps, random swaps)")
    print(f"simulator: {t_sim / len(cands) * 1000:.3f} ms/candidate   "
          f"validator: {t_val / len(cands) * 1000:.1f} ms/candidate")
    print(f"speed ratio validator/simulator: {t_val / max(t_sim, 1e-9):.0f}x   verdicts agree: {agree}/{len(cands)}")

    task = Task("bench", "classical", "logistics", "bench")
    lines = [f"({n} {' '.join(a)})" for n, a in plan]
    swapped = list(lines)
    swapped[2] = "(drive-truck tru2 apt2 pos2 cit2)"
    cases = {13: swapped, 14: lines[5:] + lines[:5], 15: lines[:4] + lines[3:],
             16: lines + ["(drive-truck tru1 apt1 pos1 cit1)"],
             17: [s for s in lines if not s.startswith("(fly-airplane")]}
    figures: dict = {"candidates": len(cands), "simulator_ms": t_sim / len(cands) * 1000,
                     "validator_ms": t_val / len(cands) * 1000, "verdicts_agree": agree, "agents": {}}
    for agent_id, steps in cases.items():
        state = EpisodeState("bench", domain=domain, problem=problem, plan="\n".join(steps) + "\n")
        ctx = AgentContext(task=task, limits=solvers.Limits(timeout_s=30), rng=random.Random(0))
        t0 = time.perf_counter()
        out = asyncio.run(make_agent(agent_id).apply(state, ctx))
        ms = (time.perf_counter() - t0) * 1000
        print(f"agent {agent_id}: ok={out.ok} {ms:.0f} ms  solver {out.solver_cpu_s * 1000:.0f} ms  {out.message[:90]}")
        figures["agents"][agent_id] = {"ok": out.ok, "ms": ms, "solver_ms": out.solver_cpu_s * 1000}
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()

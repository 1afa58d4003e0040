"""Are the simulated world's records the same as at another commit? (SIMULATED world, real solvers)

    python benchmarks/sim_records_parity.py --base REV [--tasks SPEC] [--seeds 3]

Runs the same episodes (several policies, the teacher's simulated chat among them, at latency_scale
0) in the tree of REV (a `git archive` in a temporary folder, on PYTHONPATH) and in this checkout,
and compares every record field by field, the Python types of the step fields, the Arrow schema of
the step rows, the teacher's system prompt and three drawn world files. What the clock decides is
left out: wall/CPU times, the decision latency, a solver-only step's latency, and a deterministic
agent's measured latency (LLM-calling steps' latencies are simulated and compared). Exits 1 on any
other difference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("rules+scripted", "rules+scripted:noise=0.3,seed=5", "random:seed=2", "rules+teacher:model=sim",
            "rules+teacher:model=sim,profile=stronger,quality=0.7,unparsable=0.2,attempts=2,fallback=4",
            "rules+dyn:scripted")
CLOCK = ("wall_s", "created_at", "solver_cpu_s", "solver_versions", "code_version")

# Run inside each tree (imports only what both trees have).
DUMP = r'''
import asyncio, json, sys
from dataclasses import asdict
from rollout.core.agent_table import AGENT_TABLE
from rollout.core.trajectory import episodes_to_table
from rollout.loop.episode import EpisodeConfig, run_episode
from rollout.policies import make_policy
from rollout.policies.teacher import system_prompt
from rollout.sim import SimConfig
from rollout.sim.world_family import draw_worlds, to_yaml
from rollout.tasks import load_tasks

policies, tasks, seeds = json.loads(sys.argv[1]), load_tasks(sys.argv[2]), range(int(sys.argv[3]))
out = {"prompt": system_prompt(True) + system_prompt(False), "worlds": [to_yaml(w) for w in draw_worlds(3, seed=7)],
       "kinds": {a.agent_id: a.kind for a in AGENT_TABLE}}
for policy in policies:
    pol = make_policy(policy, seed=3)
    async def run():
        configs = [EpisodeConfig(max_steps=8, seed=s, llm_backend="sim", sim=SimConfig(latency_scale=0.0))
                   for s in seeds]
        return [await run_episode(t, pol, c) for t in tasks for c in configs]
    records = asyncio.run(run())
    out[policy] = {"records": [asdict(r) for r in records], "arrow": str(episodes_to_table(records).schema),
                   "types": sorted({f"{k}:{type(v).__name__}" for r in records for s in r.steps
                                    for k, v in asdict(s).items()})}
json.dump(out, sys.stdout, sort_keys=True)
'''


def dump(tree: Path, tasks: str, seeds: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", DUMP, json.dumps(POLICIES), tasks, str(seeds)], cwd=tree,
                          env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"episodes failed in {tree}:\n{proc.stderr[-1500:]}")
    return json.loads(proc.stdout)


def stable(record: dict, kinds: dict[str, str]) -> dict:
    out = {k: v for k, v in record.items() if k not in CLOCK}
    steps = []
    for step in record["steps"]:
        step = {k: v for k, v in step.items() if k != "decision_latency_ms"}
        if kinds.get(str(step["agent_id"])) != "llm":
            step.pop("latency_ms")  # measured (solver calls, a deterministic agent), not simulated
        state = json.loads(step["state_json"])
        state.pop("planner_log")  # the planner's own timings
        step["state_json"] = state
        steps.append(step)
    out["steps"] = steps
    return out


def differences(base: dict, head: dict) -> list[str]:
    found = [key for key in ("prompt", "worlds", "kinds") if base[key] != head[key]]
    kinds = base["kinds"]
    for policy in POLICIES:
        b, h = base[policy], head[policy]
        found += [f"{policy}: {key}" for key in ("arrow", "types") if b[key] != h[key]]
        if len(b["records"]) != len(h["records"]):
            found.append(f"{policy}: {len(b['records'])} vs {len(h['records'])} records")
            continue
        for i, (rb, rh) in enumerate(zip(b["records"], h["records"], strict=True)):
            if stable(rb, kinds) != stable(rh, kinds):
                found.append(f"{policy}: episode {i} ({rb['task_id']}, seed {rb['seed']})")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--tasks", default="planbench:blocksworld:3,planbench:logistics:2")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="halo-parity-") as tmp:
        archive = subprocess.run(["git", "archive", args.base], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        base = dump(Path(tmp), args.tasks, args.seeds)
    head = dump(ROOT, args.tasks, args.seeds)
    episodes = sum(len(head[p]["records"]) for p in POLICIES)
    steps = sum(len(r["steps"]) for p in POLICIES for r in head[p]["records"])
    found = differences(base, head)
    print(f"SIMULATED world, {len(POLICIES)} policies, {episodes} episodes, {steps} steps: "
          f"{len(found)} difference(s) from {args.base}")
    for line in found:
        print(f"  {line}")
    print(f"step field types: {', '.join(head[POLICIES[0]]['types'])}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

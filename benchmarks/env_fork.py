"""What forking the refinement-loop environment costs, on planbench states (rollout/loop/env.py).

Episodes of rules+scripted run on planbench tasks in the simulated world; at every step the
environment is forked: the time of one `fork()` (the median of `--repeats` forks of that state)
and the memory a fork holds (tracemalloc: the bytes still allocated while the fork is alive; the
task, the texts and the records are shared, immutable, so they cost nothing). Targets: median
<= 1 ms and <= 50 KB. The pickled size of a snapshot (what shipping it to another process would
cost) is printed beside them, without a target. SIMULATED (llm_backend=sim).

    python benchmarks/env_fork.py                  # planbench:all:10 (about a minute)
    python benchmarks/env_fork.py --tasks planbench:all --repeats 50
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import pickle
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rollout.loop.env import RefinementEnv  # noqa: E402
from rollout.policies import make_policy  # noqa: E402
from rollout.sim import SimConfig  # noqa: E402
from rollout.sim.backend import SimAgents  # noqa: E402
from rollout.tasks import Task, load_tasks  # noqa: E402

TARGET_MS = 1.0
TARGET_KB = 50.0


def fork_cost(env: RefinementEnv, repeats: int) -> tuple[float, float, float]:
    """(median ms per fork, KB a fork holds, KB of a pickled snapshot) at the env's current step."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        env.fork()
        times.append((time.perf_counter() - t0) * 1000.0)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    twin = env.fork()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del twin
    pickled = len(pickle.dumps(env.snapshot()))
    return statistics.median(times), held / 1024.0, pickled / 1024.0


async def episode_costs(task: Task, seed: int, repeats: int) -> list[tuple[float, float, float]]:
    env = RefinementEnv(SimAgents(SimConfig(latency_scale=0.0)))
    policy = make_policy("rules+scripted", seed=seed)
    await env.reset(task, seed)
    out = [fork_cost(env, repeats)]
    while not env.done:
        await env.step(await policy.adecide(env.state))
        if not env.done:
            out.append(fork_cost(env, repeats))
    env.close()
    return out


def judge(figures: dict[str, float]) -> tuple[list[str], bool]:
    """Lines to print and whether every target is met (a missing figure fails)."""
    ms, kb = figures.get("median_fork_ms"), figures.get("median_fork_kb")
    ok_ms = ms is not None and ms <= TARGET_MS
    ok_kb = kb is not None and kb <= TARGET_KB
    lines = [f"median fork time: {ms if ms is not None else 'missing'} ms (target <= {TARGET_MS:g}): "
             f"{'met' if ok_ms else 'NOT met'}",
             f"median fork memory: {kb if kb is not None else 'missing'} KB (target <= {TARGET_KB:g}): "
             f"{'met' if ok_kb else 'NOT met'}"]
    return lines, ok_ms and ok_kb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="planbench:all:10")
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    tasks = load_tasks(args.tasks)
    costs = [c for i, t in enumerate(tasks) for c in asyncio.run(episode_costs(t, args.seed + i, args.repeats))]
    figures = {"states": len(costs), "median_fork_ms": round(statistics.median(c[0] for c in costs), 4),
               "p90_fork_ms": round(sorted(c[0] for c in costs)[int(0.9 * (len(costs) - 1))], 4),
               "median_fork_kb": round(statistics.median(c[1] for c in costs), 2),
               "median_pickled_snapshot_kb": round(statistics.median(c[2] for c in costs), 2)}
    print(f"SIMULATED world, {len(tasks)} tasks of {args.tasks}, {len(costs)} states")
    lines, ok = judge(figures)
    print("\n".join(lines))
    print(json.dumps(figures))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

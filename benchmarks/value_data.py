"""Training episodes for the search's value model: greedy and search episodes on generated tasks,
failed ones included, written to a trajectory store run (`halo train --value --from STORE/RUN`).

Every task of the chosen levels runs once with each listed policy (seeds `--seed` + its index), in
the SIMULATED world (llm_backend=sim); episodes that broke on infrastructure are not written. The
value model learns from what the runs hold, so the data's tasks must not be the ones it is
measured on (use another generation seed).

    halo tasks generate all --difficulty hard,extreme --count 40 --seed 53 --out /tmp/s29v/train
    python benchmarks/value_data.py --tasks gen:/tmp/s29v/train --per-level 110 --store /tmp/s29v/store

Each policy's episodes go to their own run, RUN-p0, RUN-p1, ... (a policy's episode on a task and
seed has the same episode ID as another policy's): train on all of them with one `--from` each.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import solvers  # noqa: E402
from benchmarks.search import load_levels  # noqa: E402
from rollout.core.trajectory import EpisodeRecord, is_infra_failure  # noqa: E402
from rollout.loop.episode import EpisodeConfig, run_episode  # noqa: E402
from rollout.policies import make_policy  # noqa: E402
from rollout.sim import SimConfig  # noqa: E402
from rollout.store import TrajectoryStore  # noqa: E402
from rollout.tasks import Task  # noqa: E402

DEFAULT_POLICIES = "rules+scripted;search:prior=rules+scripted,width=3,max_calls=20"


async def run_all(tasks: list[tuple[str, Task]], policies: list[str], run_id: str, seed: int,
                  concurrency: int) -> list[list[EpisodeRecord]]:
    """Every task with every policy; the episodes per policy, in task order."""
    sem = asyncio.Semaphore(concurrency)
    config = EpisodeConfig(seed=seed, run_id=run_id, sim=SimConfig(latency_scale=0.0))

    async def one(i: int, task: Task, k: int) -> EpisodeRecord:
        async with sem:
            cfg = replace(config, seed=seed + i, run_id=f"{run_id}-p{k}")
            return await run_episode(task, make_policy(policies[k], seed=seed + i), cfg)

    jobs = [[one(i, task, k) for i, (_, task) in enumerate(tasks)] for k in range(len(policies))]
    flat = await asyncio.gather(*(job for per_policy in jobs for job in per_policy))
    return [list(flat[k * len(tasks):(k + 1) * len(tasks)]) for k in range(len(policies))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True, help="a generated set, gen:DIR, holding hard and extreme tasks")
    ap.add_argument("--levels", default="hard,extreme")
    ap.add_argument("--per-level", type=int, default=300)
    ap.add_argument("--policies", default=DEFAULT_POLICIES, help="policy specs separated by ';'")
    ap.add_argument("--store", required=True, help="trajectory store directory or URL")
    ap.add_argument("--run", default="value-data", help="run id the episodes are written under")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args(argv)
    solvers.configure_cache(True)
    policies = [p.strip() for p in args.policies.split(";") if p.strip()]
    for spec in policies:
        make_policy(spec).close()  # a bad spec fails here, before any episode runs
    tasks = load_levels(args.tasks, args.levels.split(","), args.per_level, args.seed)
    t0 = time.monotonic()
    per_policy = asyncio.run(run_all(tasks, policies, args.run, args.seed, args.concurrency))
    store, written = TrajectoryStore(args.store), 0
    print(f"SIMULATED world (llm_backend=sim); {len(tasks)} tasks; {time.monotonic() - t0:.0f} s")
    for k, (policy, episodes) in enumerate(zip(policies, per_policy, strict=True)):
        kept = [e for e in episodes if not is_infra_failure(e) and not e.error]
        n = store.write_episodes(f"{args.run}-p{k}", kept)
        ok = sum(bool(e.success_oracle) for e in kept)
        print(f"{policy}: {n} episodes written to {args.store}/{args.run}-p{k} ({ok} oracle successes, "
              f"{len(kept) - ok} failures, {len(episodes) - len(kept)} dropped)")
        written += n
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())

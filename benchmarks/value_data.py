"""Training episodes for the search's value model: greedy and search episodes on generated tasks,
failed ones included, written to a trajectory store run (`halo train --value --from STORE/RUN`).

Every task of the chosen levels runs once with each listed policy (seeds `--seed` + its index), in
the SIMULATED world (llm_backend=sim); episodes that broke on infrastructure are not written. The
value model learns from what the runs hold, so the data's tasks must not be the ones it is
measured on (use another generation seed).

    halo tasks generate all --difficulty hard,extreme --count 40 --seed 53 --out /tmp/s29v/train
    python benchmarks/value_data.py --tasks gen:/tmp/s29v/train --per-level 300 --store /tmp/s29v/store
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
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

DEFAULT_POLICIES = "rules+scripted;search:prior=rules+scripted,width=3,max_calls=16"


async def run_all(tasks: list[tuple[str, Task]], policies: list[str], run_id: str, seed: int,
                  concurrency: int) -> list[EpisodeRecord]:
    sem = asyncio.Semaphore(concurrency)
    config = EpisodeConfig(seed=seed, run_id=run_id, sim=SimConfig(latency_scale=0.0))

    async def one(i: int, task: Task, policy: str) -> EpisodeRecord:
        async with sem:
            cfg = EpisodeConfig(**{**config.__dict__, "seed": seed + i})
            return await run_episode(task, make_policy(policy, seed=seed + i), cfg)

    jobs = [one(i, task, policy) for i, (_, task) in enumerate(tasks) for policy in policies]
    return list(await asyncio.gather(*jobs))


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
    episodes = asyncio.run(run_all(tasks, policies, args.run, args.seed, args.concurrency))
    kept = [e for e in episodes if not is_infra_failure(e) and not e.error]
    written = TrajectoryStore(args.store).write_episodes(args.run, kept)
    ok = sum(bool(e.success_oracle) for e in kept)
    print(f"SIMULATED world (llm_backend=sim); {len(tasks)} tasks x {len(policies)} policies: {written} episodes "
          f"written to {args.store}/{args.run} ({ok} oracle successes, {len(kept) - ok} failures, "
          f"{len(episodes) - len(kept)} dropped); {time.monotonic() - t0:.0f} s")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())

"""Rollout-job benchmark: scaling, overhead, store throughput, memory. Ratios from one run.

    python benchmarks/rollout.py [--episodes 80] [--tasks planbench:all] [--store-rows 60000] [--dashboard]

1. scaling   episodes/s of the simulated world with 2 workers vs 1 (target >= 1.8x on an idle machine)
2. overhead  wall time vs the solver-bound limit = sum of the episodes' solver CPU time / CPUs used
             (target <= 1.15x; the sim agents' and policy's own CPU time counts as overhead here)
3. store     step records/s through one committer (target >= 20,000), Delta Lake vs plain Parquet
             files written the same way; peak RSS per worker actor (target < 500 MB)
Also: resident memory of the idle local Ray cluster started lean (no dashboard), and with it.
Timings are noisy on a shared machine; the ratios are computed against baselines of the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

# This file is named like the `rollout` package; keep its folder off the import path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import pyarrow.parquet as pq  # noqa: E402


def _job(store_dir: Path, tasks: str, episodes: int, replicas: int, run_id: str):  # noqa: ANN202
    from rollout.driver import RolloutConfig, RolloutJob

    config = RolloutConfig(store_url=str(store_dir), tasks=tasks, episodes=episodes, replicas=replicas,
                           run_id=run_id, progress=False)
    return RolloutJob(config).run()


def _store_throughput(records, rows_target: int, workdir: Path) -> dict[str, float]:  # noqa: ANN001
    """Commit copies of real episodes in batches the committer would form (20,000 rows)."""
    from rollout.store import TrajectoryStore
    from rollout.store.trajectory_store import episodes_to_arrow

    batch_rows, batches, rows, i = 20_000, [], 0, 0
    current: list = []
    while rows < rows_target:
        ep = dataclasses.replace(records[i % len(records)], episode_id=f"bench-{i:07d}", run_id="bench")
        current.append(ep)
        rows += ep.num_steps
        i += 1
        if sum(e.num_steps for e in current) >= batch_rows:
            batches.append(current)
            current = []
    if current:
        batches.append(current)
    store = TrajectoryStore(workdir / "delta")
    t0 = time.perf_counter()
    for batch in batches:
        store.write_episodes("bench", batch)
    delta_s = time.perf_counter() - t0
    assert len(store.episode_ids("bench")) == i
    # The simple alternative: one zstd Parquet file per batch, renamed into place (no log, no dedup).
    plain = workdir / "plain" / "run_id=bench"
    plain.mkdir(parents=True)
    t0 = time.perf_counter()
    for n, batch in enumerate(batches):
        table = episodes_to_arrow(batch)
        tmp = plain / f".part-{n}.tmp"
        pq.write_table(table, tmp, compression="zstd", compression_level=3)
        tmp.rename(plain / f"part-{n}.parquet")
    plain_s = time.perf_counter() - t0
    return {"rows": rows, "episodes": i, "commits": len(batches), "delta_rows_per_s": rows / delta_s,
            "plain_rows_per_s": rows / plain_s}


def _store_only(args: argparse.Namespace) -> None:
    import asyncio

    from rollout.episode import EpisodeConfig, run_episodes
    from rollout.policies import make_policy
    from rollout.tasks import load_tasks

    tasks = load_tasks(args.tasks)[:: max(1, len(load_tasks(args.tasks)) // 40)][:40]
    records = asyncio.run(run_episodes(tasks, make_policy("rules+scripted"), EpisodeConfig(run_id="bench")))
    work = Path(tempfile.mkdtemp(prefix="halo-bench-"))
    try:
        store = _store_throughput(records, args.store_rows, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"3. store: {store['delta_rows_per_s']:,.0f} step records/s per committer with Delta Lake "
          f"({store['rows']:,} rows of real sim episodes, {store['commits']} commits; target >= 20,000); plain "
          f"Parquet files {store['plain_rows_per_s']:,.0f} rows/s -> Delta/plain "
          f"{store['delta_rows_per_s'] / store['plain_rows_per_s']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=80, help="episodes per scaling job")
    parser.add_argument("--tasks", default="planbench:all")
    parser.add_argument("--store-rows", type=int, default=60_000)
    parser.add_argument("--dashboard", action="store_true", help="also measure a cluster with the dashboard")
    parser.add_argument("--store-only", action="store_true", help="only section 3's store throughput (no Ray)")
    args = parser.parse_args()
    if args.store_only:
        _store_only(args)
        return

    from cluster.ray_cluster import local_cluster_rss_mb, shutdown, start_or_join

    work = Path(tempfile.mkdtemp(prefix="halo-bench-"))
    try:
        handle = start_or_join(num_cpus=2)
        time.sleep(3)
        idle_mb = local_cluster_rss_mb()
        try:
            one = _job(work / "s1", args.tasks, args.episodes, 1, "bench-1-worker")
            two = _job(work / "s2", args.tasks, args.episodes, 2, "bench-2-workers")
        finally:
            shutdown(handle)
        dash_mb = None
        if args.dashboard:
            handle = start_or_join(num_cpus=2, dashboard=True)
            time.sleep(5)
            dash_mb = local_cluster_rss_mb()
            shutdown(handle)

        from rollout.store import TrajectoryStore

        records = TrajectoryStore(work / "s2").read_episodes()
        store = _store_throughput(records, args.store_rows, work / "store")

        rate1, rate2 = one.committed / one.run_s, two.committed / two.run_s
        limit_s = two.solver_cpu_s / two.cpus_used
        print(f"# rollout benchmark ({args.episodes} sim episodes per job over {args.tasks})")
        print(f"1. scaling: 1 worker {rate1:.2f} episodes/s, 2 workers {rate2:.2f} episodes/s -> "
              f"{rate2 / rate1:.2f}x (target >= 1.8x)")
        cpu_limit_s = two.worker_cpu_s / two.cpus_used
        print(f"2. overhead: 2-worker wall {two.run_s:.2f}s vs solver-bound limit {limit_s:.2f}s "
              f"(solver CPU {two.solver_cpu_s:.2f}s / {two.cpus_used} CPUs) -> {two.run_s / limit_s:.2f}x "
              f"(target <= 1.15x)")
        print(f"   vs CPU-bound limit {cpu_limit_s:.2f}s (all worker CPU incl. sim agents and policy "
              f"{two.worker_cpu_s:.2f}s / {two.cpus_used} CPUs) -> {two.run_s / cpu_limit_s:.2f}x; "
              f"solver share of worker CPU {two.solver_cpu_s / two.worker_cpu_s:.0%}")
        delta_vs_plain = store["delta_rows_per_s"] / store["plain_rows_per_s"]
        print(f"3. store: {store['delta_rows_per_s']:,.0f} step records/s per committer with Delta Lake "
              f"({store['rows']:,} rows, {store['commits']} commits; target >= 20,000); plain Parquet files "
              f"{store['plain_rows_per_s']:,.0f} rows/s -> Delta/plain {delta_vs_plain:.2f}x")
        print(f"   peak RSS per worker actor: {max(one.peak_rss_mb, two.peak_rss_mb):.0f} MB (target < 500 MB)")
        print(f"   idle local Ray cluster (lean, no dashboard): {idle_mb:.0f} MB resident"
              + (f"; with dashboard {dash_mb:.0f} MB" if dash_mb is not None else ""))
        print(f"   worker start-up {two.startup_s:.1f}s; in-job committer time {two.commit_s:.2f}s over "
              f"{two.commits} commits")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

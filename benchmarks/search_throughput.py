"""Episodes per CPU-second of search vs the greedy policy, run the same way (issue 29, must-show 4).

The same tasks and seeds run once greedy and once with search, each as one batch of concurrent
episodes in one event loop (the way a rollout worker runs them), with the solver result cache on
for both. CPU is what the episodes used: this process's CPU time over the batch plus the
planner and validator CPU the episodes recorded (solver subprocesses). Target: search's
episodes per CPU-second >= 0.8x greedy's. Wall-clock episodes/s is printed beside it (on a
shared machine it measures the load as much as the code). SIMULATED (llm_backend=sim).

    python benchmarks/search_throughput.py --tasks gen:sets/search:level=hard --episodes 60

`--job`: the same comparison as rollout jobs in real time under one LLM budget, episodes/s per
CPU (benchmarks/search_job.py):

    python benchmarks/search_throughput.py --job --tasks gen:sets/search:level=hard --episodes 48 \
        --llm-rpm 300 --llm-concurrency 32 --parallel 3 --serial-too
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))  # search_job (after the repo: benchmarks/rollout.py)

import solvers  # noqa: E402
from rollout.core.trajectory import EpisodeRecord  # noqa: E402
from rollout.loop.episode import EpisodeConfig, run_episode  # noqa: E402
from rollout.policies import make_policy  # noqa: E402
from rollout.sim import SimConfig  # noqa: E402
from rollout.tasks import Task, load_tasks  # noqa: E402

TARGET_RATIO = 0.8


async def batch(tasks: list[Task], spec: str, concurrency: int) -> tuple[list[EpisodeRecord], float, float]:
    """(records, wall seconds, CPU seconds) of one batch."""
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int, task: Task) -> EpisodeRecord:
        async with sem:
            config = EpisodeConfig(seed=i, run_id="bench-throughput", sim=SimConfig(latency_scale=0.0))
            return await run_episode(task, make_policy(spec, seed=i), config)

    wall0, cpu0 = time.perf_counter(), time.process_time()
    records = list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))
    wall, own_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return records, wall, own_cpu + sum(r.solver_cpu_s for r in records)


def judge(figures: dict[str, float]) -> tuple[str, bool]:
    ratio = figures.get("per_cpu_ratio")
    ok = ratio is not None and ratio >= TARGET_RATIO
    return (f"episodes per CPU-second, search / greedy: {ratio} (target >= {TARGET_RATIO:g}): "
            f"{'met' if ok else 'NOT met'}"), ok


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--greedy", default="rules+scripted")
    ap.add_argument("--search", default="search:prior=rules+scripted,width=3,max_calls=20")
    ap.add_argument("--concurrency", type=int, default=4)
    job = ap.add_argument_group("--job: rollout jobs in real time under one LLM budget")
    job.add_argument("--job", action="store_true")
    job.add_argument("--cpus", type=int, default=2, help="the job's CPUs (one worker each)")
    job.add_argument("--llm-rpm", type=float, default=300.0, help="the job-wide budget (0: none)")
    job.add_argument("--llm-concurrency", type=int, default=32, help="the job-wide budget (0: none)")
    job.add_argument("--parallel", type=int, default=3, help="the search's children at once")
    job.add_argument("--serial-too", action="store_true", help="also the search with parallel=1")
    job.add_argument("--trim", type=float, default=0.2, help="share of completions left out at each end")
    return ap


def main_job(args: argparse.Namespace) -> int:
    import search_job

    jobs = [("greedy", args.greedy), ("search", f"{args.search},parallel={args.parallel}")]
    if args.serial_too:
        jobs.append(("search_serial", f"{args.search},parallel=1"))
    out = search_job.run(args, jobs)
    budget = f"--llm-rpm {args.llm_rpm:g} --llm-concurrency {args.llm_concurrency} (0: none)"
    print(f"SIMULATED world in real time ({search_job.REALTIME}); {args.episodes} episodes per job of "
          f"{args.tasks}; {args.cpus} CPUs, one worker each; LLM budget {budget}")
    print(json.dumps(out, indent=1))
    line, ok = search_job.judge(out["search_per_cpu_ratio"]["lower"])
    print(line)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.job:
        return main_job(args)
    solvers.configure_cache(True)
    tasks = load_tasks(args.tasks)[:args.episodes]
    figures: dict[str, float] = {}
    for label, spec in (("greedy", args.greedy), ("search", args.search)):
        records, wall, cpu = asyncio.run(batch(tasks, spec, args.concurrency))
        broken = sum(bool(r.error or r.infra_error) for r in records)
        figures |= {f"{label}_per_cpu_s": len(records) / cpu, f"{label}_per_wall_s": len(records) / wall,
                    f"{label}_broken": broken}
    figures["per_cpu_ratio"] = round(figures["search_per_cpu_s"] / figures["greedy_per_cpu_s"], 3)
    print(f"SIMULATED world; {len(tasks)} episodes per policy of {args.tasks}")
    line, ok = judge(figures)
    print(line)
    print(json.dumps(figures))
    return 0 if ok and not (figures["greedy_broken"] or figures["search_broken"]) else 1


if __name__ == "__main__":
    sys.exit(main())

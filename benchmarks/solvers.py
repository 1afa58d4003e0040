"""Solver speed: the sandboxed fast path against the stock Fast Downward driver.

Prints per-call medians and these ratios, all measured in this one run:
  1. speed-up  = stock driver / sandboxed fast path, median of per-instance ratios over the
                 PlanBench blocksworld instances (target >= 5x), plan costs identical;
  2. overhead  = fast path with the sandbox / the same path without it (target <= 1.10x);
  3. scaling   = throughput of 2 worker processes / 1 worker process (target >= 1.8x on an idle
                 machine with >= 2 free cores);
  4. one-shot  = a fresh `halo solve` process per call / the stock driver per call, median of
                 per-call ratios (target <= 1.2x); both byte-compiled, as installed (compile_project);
  5. cache     = episodes/s of the CPU-bound rollout job (llm_backend=sim, 2 workers) with the
                 result cache on / off, and its hit rate (reported, no target).

    python benchmarks/solvers.py [--instances 60] [--repeats 3] [--one-shot 12] [--rollout-episodes 120]
                                 [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import solvers  # noqa: E402
from solvers import fd  # noqa: E402
from solvers.limits import Limits  # noqa: E402
from solvers.pool import WorkerPool  # noqa: E402

DATA = ROOT / "tests" / "fixtures" / "pddl" / "planbench" / "blocksworld"
LIMITS = Limits(timeout_s=60)


def load(n: int) -> tuple[str, list[tuple[str, str]]]:
    domain = (DATA / "domain.pddl").read_text()
    files = sorted((DATA / "instances").glob("instance-*.pddl"), key=lambda p: int(p.stem.split("-")[1]))
    if len(files) < n:
        raise SystemExit(f"need {n} instances in {DATA / 'instances'}, found {len(files)}")
    return domain, [(p.stem, p.read_text()) for p in files[:n]]


def fast_call(pool: WorkerPool, domain: str, problem: str) -> tuple[float, float | None]:
    """The call path of solvers.plan(planner="fd") on a given pool: (seconds, plan cost)."""
    t0 = time.perf_counter()
    run = pool.request(fd.request("lama-first", None), files={"domain.pddl": domain, "problem.pddl": problem},
                       limits=LIMITS, collect=("sas_plan",))
    result = fd.to_result(run)
    elapsed = time.perf_counter() - t0
    if not result.ok:
        raise SystemExit(f"fast path failed: {result.category} {result.message}")
    return elapsed, result.cost


def stock_call(domain: str, problem: str) -> tuple[float, float | None]:
    t0 = time.perf_counter()
    result = fd.run_stock_driver(domain, problem, limits=LIMITS)
    elapsed = time.perf_counter() - t0
    if not result.ok:
        raise SystemExit(f"stock driver failed: {result.category} {result.message}")
    return elapsed, result.cost


def throughput(level: str, workers: int, domain: str, instances: list[tuple[str, str]], rounds: int) -> float:
    """Calls per second with `workers` worker processes, each kept busy by its own client thread."""
    pool = WorkerPool(level, size=workers)
    try:
        pool.warm(workers)
        jobs = [problem for _ in range(rounds) for _, problem in instances]
        lock = threading.Lock()

        def client() -> None:
            while True:
                with lock:
                    if not jobs:
                        return
                    problem = jobs.pop()
                fast_call(pool, domain, problem)

        total = len(jobs)
        t0 = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return total / (time.perf_counter() - t0)
    finally:
        pool.close()


def bwrap_start_ms(samples: int = 15) -> float | None:
    """What one bubblewrap start costs: the price a per-call bwrap design would pay every call."""
    import subprocess

    from solvers.sandbox import bwrap_argv, bwrap_path

    if bwrap_path() is None or solvers.sandbox_level() != "bwrap":
        return None
    argv = bwrap_argv([]) + ["/usr/bin/true"]
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        subprocess.run(argv, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env={"PATH": "/usr/bin"})
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def halo_argv() -> list[str]:
    """The installed `halo` console script (what a user runs), else `python -m cluster.cli`."""
    script = Path(sys.executable).with_name("halo")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cluster.cli"]


def compile_project() -> None:
    """Byte-compile the project as pip does for an installed package (the stock driver's
    translator has its .pyc files from its install). Without this, a machine that sets
    PYTHONDONTWRITEBYTECODE (this one does) compiles the project's sources again in every fresh
    `halo solve` process, about 60 ms per call that no installed copy pays."""
    import compileall

    for package in ("solvers", "cluster"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def one_shot(domain_path: Path, instances: list[Path], domain: str) -> tuple[list[float], list[float]]:
    """Per call: a fresh `halo solve` process, then the stock driver (interleaved)."""
    compile_project()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HALO_SOLVER_CACHE", None)
    halo_s, stock_s = [], []
    for path in instances:
        t0 = time.perf_counter()
        proc = subprocess.run([*halo_argv(), "solve", str(domain_path), str(path), "--timeout", "60"],
                              capture_output=True, text=True, env=env, check=False)
        halo_s.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"halo solve failed on {path.name}: {proc.stdout[-500:]}{proc.stderr[-500:]}")
        stock_s.append(stock_call(domain, path.read_text())[0])
    return halo_s, stock_s


def rollout_job(episodes: int) -> None:
    """One CPU-bound rollout job (simulated LLM world) on a 2-CPU local Ray; prints JSON."""
    import ray

    from rollout.driver import RolloutConfig, RolloutJob

    # address="local": a fresh cluster of our own, never one another process left running.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    store = tempfile.mkdtemp(prefix="halo-bench-cache-")
    try:
        summary = RolloutJob(RolloutConfig(store_url=store, tasks="planbench:all", episodes=episodes, replicas=2,
                                           run_id="cache-bench", progress=False)).run()
    finally:
        ray.shutdown()
        shutil.rmtree(store, ignore_errors=True)
    print(json.dumps({"episodes_per_s": summary.run_s and summary.committed / summary.run_s,
                      "committed": summary.committed, "run_s": summary.run_s,
                      "hits": summary.solver_cache.get("hits", 0), "misses": summary.solver_cache.get("misses", 0),
                      "hit_rate": summary.solver_cache_hit_rate}))


def rollout_with_and_without_cache(episodes: int) -> dict[str, dict]:
    out = {}
    for label, setting in (("off", "0"), ("on", "1")):
        env = dict(os.environ, PYTHONPATH=str(ROOT), HALO_SOLVER_CACHE=setting)
        proc = subprocess.run([sys.executable, __file__, "--rollout-job", str(episodes)], capture_output=True,
                              text=True, env=env, check=False)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"rollout job (cache {label}) failed: {proc.stderr[-1500:]}")
        out[label] = json.loads(lines[-1])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3, help="fast-path calls per instance and level")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the instances per throughput run")
    parser.add_argument("--one-shot", type=int, default=12, help="one-shot `halo solve` calls (0: skip)")
    parser.add_argument("--rollout-episodes", type=int, default=120,
                        help="episodes per rollout job for the cache figure (0: skip)")
    parser.add_argument("--quick", action="store_true", help="a few minutes: 12 instances, 2 repeats, 6 one-shot "
                                                             "calls, 40 rollout episodes")
    parser.add_argument("--rollout-job", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    args = parser.parse_args()
    if args.rollout_job:
        rollout_job(args.rollout_job)
        return 0
    if args.quick:
        args.instances, args.repeats, args.rounds = min(args.instances, 12), 2, 1
        args.one_shot, args.rollout_episodes = min(args.one_shot, 6), min(args.rollout_episodes, 40)

    level = solvers.sandbox_level()
    domain, instances = load(args.instances)
    sandboxed, bare = WorkerPool(level, size=1), WorkerPool("none", size=1)
    sandboxed.warm(1)
    bare.warm(1)
    stock_s, fast_s, bare_s, ratios, mismatches = [], [], [], [], []
    try:
        for name, problem in instances:
            stock_t, stock_cost = stock_call(domain, problem)
            times_sb, times_bare = [], []
            for _ in range(args.repeats):  # interleaved, so load changes hit both levels alike
                t, cost = fast_call(sandboxed, domain, problem)
                times_sb.append(t)
                if cost != stock_cost:
                    mismatches.append((name, stock_cost, cost))
                times_bare.append(fast_call(bare, domain, problem)[0])
            stock_s.append(stock_t)
            fast_s.append(statistics.median(times_sb))
            bare_s.append(statistics.median(times_bare))
            ratios.append(stock_t / statistics.median(times_sb))
    finally:
        sandboxed.close()
        bare.close()

    one = throughput(level, 1, domain, instances, args.rounds)
    two = throughput(level, 2, domain, instances, args.rounds)

    bwrap_ms = bwrap_start_ms()
    files = sorted((DATA / "instances").glob("instance-*.pddl"), key=lambda p: int(p.stem.split("-")[1]))
    shot_halo, shot_stock = one_shot(DATA / "domain.pddl", files[: args.one_shot], domain) if args.one_shot \
        else ([], [])
    shot = statistics.median(h / s for h, s in zip(shot_halo, shot_stock, strict=True)) if shot_halo else None
    jobs = rollout_with_and_without_cache(args.rollout_episodes) if args.rollout_episodes else None
    speedup = statistics.median(ratios)
    overhead = statistics.median(fast_s) / statistics.median(bare_s)
    scaling = two / one
    rows = [
        ("stock fast-downward.py driver (no sandbox)", f"{statistics.median(stock_s) * 1000:8.1f} ms/call"),
        (f"fast path, sandbox '{level}'", f"{statistics.median(fast_s) * 1000:8.1f} ms/call"),
        ("fast path, no sandbox", f"{statistics.median(bare_s) * 1000:8.1f} ms/call"),
        ("one bwrap start (per-call bwrap would add this)",
         f"{bwrap_ms:8.1f} ms" if bwrap_ms is not None else "     n/a"),
        (f"throughput, 1 worker ({level})", f"{one:8.1f} calls/s"),
        (f"throughput, 2 workers ({level})", f"{two:8.1f} calls/s"),
    ]
    if shot_halo:
        rows += [("one-shot `halo solve` (fresh process per call)",
                  f"{statistics.median(shot_halo) * 1000:8.1f} ms/call"),
                 ("stock driver, same calls", f"{statistics.median(shot_stock) * 1000:8.1f} ms/call")]
    if jobs:
        rows += [(f"rollout job, cache off ({args.rollout_episodes} episodes, sim)",
                  f"{jobs['off']['episodes_per_s']:8.2f} episodes/s"),
                 ("rollout job, cache on", f"{jobs['on']['episodes_per_s']:8.2f} episodes/s"),
                 ("  solver cache hit rate (hits / calls)",
                  f"{jobs['on']['hit_rate']:8.1%} ({jobs['on']['hits']}/{jobs['on']['hits'] + jobs['on']['misses']})")]
    figures = {"speedup": speedup, "overhead": overhead, "scaling": scaling,
               "stock_ms": statistics.median(stock_s) * 1000, "fast_ms": statistics.median(fast_s) * 1000,
               "bare_ms": statistics.median(bare_s) * 1000,
               "bwrap_start_ms": bwrap_ms, "throughput_1": one, "throughput_2": two,
               "sandbox": level, "instances": len(instances), "costs_identical": int(not mismatches),
               "one_shot_ratio": shot, "rollout_cache": jobs,
               "cache_gain": jobs["on"]["episodes_per_s"] / jobs["off"]["episodes_per_s"] if jobs else None}
    print(f"PlanBench blocksworld, {len(instances)} instances, lama-first, {args.repeats} fast calls per instance")
    print("-" * 78)
    for label, value in rows:
        print(f"{label:<52}{value:>26}")
    print("-" * 78)
    if jobs:
        print(f"5. rollout episodes/s, cache on / off (reported, no target): {figures['cache_gain']:.2f}x")
    print(f"plan costs identical to the stock driver: {'yes' if not mismatches else f'NO {mismatches[:5]}'}")
    return finish(figures, one_shot=bool(args.one_shot), as_json=args.json)


def targets(one_shot: bool) -> list:
    """The targets this benchmark prints (train.targets: a figure that is missing or NaN fails)."""
    from train.targets import AtLeast, AtMost

    out = [AtLeast("1. speed-up vs stock driver (median of per-instance ratios) >= 5x", "solvers", "speedup", 5.0),
           AtMost("2. sandbox overhead (with / without) <= 1.10x", "solvers", "overhead", 1.10),
           AtLeast("3. throughput 2 workers / 1 worker >= 1.8x", "solvers", "scaling", 1.8),
           AtLeast("plan costs identical to the stock driver", "solvers", "costs_identical", 1)]
    if one_shot:
        out.append(AtMost("4. one-shot halo solve / stock driver (per call) <= 1.2x", "solvers", "one_shot_ratio",
                          1.2))
    return out


def finish(figures: dict, *, one_shot: bool, as_json: bool) -> int:
    """Judge the printed targets; the exit code (1 when one failed or could not be computed)."""
    from train.targets import judge, print_verdicts

    return print_verdicts(judge(targets(one_shot), {"solvers": figures}), figures=figures, as_json=as_json)


if __name__ == "__main__":
    raise SystemExit(main())

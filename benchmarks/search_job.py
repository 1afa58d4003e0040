"""Search vs greedy as rollout jobs: episodes/s per CPU at the same LLM budget (issue 29, must-show 4).

Run through `benchmarks/search_throughput.py --job`. Each policy runs as a real rollout job (the
rollout driver, Ray started in-process with `--cpus` CPUs and one worker per CPU) over the same
tasks and seeds, in the simulated world in real time (`sim:realtime=1`: every call sleeps its
simulated latency, drawn as the world file says), under the same job-wide LLM budget
(`--llm-rpm`, `--llm-concurrency`). Throughput is measured where the job is in its steady part:
from the completion of the first `--trim` share of its episodes to that of the last `--trim`
share not yet reached (the start-up, when no episode has finished yet, and the tail, when the
window empties, are left out). Its bound comes from a bootstrap over the gaps between
completions in that part; the ratio's one-sided 95% lower bound must be >= 0.8. CPU-seconds per
episode is the workers' process-tree CPU time over the job (RolloutSummary.worker_cpu_s) per
committed episode. SIMULATED world (llm_backend=sim).
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import dataclass
from typing import Any

TARGET_RATIO = 0.8
REALTIME = "sim:realtime=1"


@dataclass
class JobFigures:
    label: str
    policy: str
    episodes: int
    run_s: float
    gaps: list[float]  # seconds between consecutive completions in the steady part
    worker_cpu_s: float
    calls_per_episode: float
    median_episode_s: float
    oracle_success: float
    max_in_flight: int
    cpus: int

    def rate(self, gaps: list[float] | None = None) -> float:
        gaps = self.gaps if gaps is None else gaps
        return len(gaps) / sum(gaps) if gaps and sum(gaps) > 0 else float("nan")

    def row(self) -> dict[str, Any]:
        rate = self.rate()
        return {"policy": self.policy, "episodes": self.episodes, "steady_episodes_per_s": round(rate, 4),
                "episodes_per_s_per_cpu": round(rate / self.cpus, 4),
                "cpu_s_per_episode": round(self.worker_cpu_s / max(1, self.episodes), 3),
                "llm_calls_per_episode": round(self.calls_per_episode, 2),
                "median_episode_wall_s": round(self.median_episode_s, 1),
                "oracle_success": round(self.oracle_success, 3), "max_in_flight": self.max_in_flight,
                "run_s": round(self.run_s, 1)}


def steady_gaps(completions: list[float], trim: float) -> list[float]:
    """Gaps between consecutive completions, leaving out the first and last `trim` share."""
    times = sorted(completions)
    lo, hi = int(len(times) * trim), int(len(times) * (1 - trim))
    part = times[lo:max(lo, hi)]
    return [b - a for a, b in zip(part, part[1:], strict=False)]


def ratio_bounds(search: JobFigures, greedy: JobFigures, *, reps: int = 2000, seed: int = 0
                 ) -> tuple[float, float, float]:
    """(ratio of per-CPU rates, one-sided 95% lower bound, upper bound), bootstrap over the gaps."""
    rng = random.Random(seed)
    point = (search.rate() / search.cpus) / (greedy.rate() / greedy.cpus)
    draws = []
    for _ in range(reps):
        s = [rng.choice(search.gaps) for _ in search.gaps]
        g = [rng.choice(greedy.gaps) for _ in greedy.gaps]
        draws.append((search.rate(s) / search.cpus) / (greedy.rate(g) / greedy.cpus))
    draws.sort()
    return point, draws[int(0.05 * reps)], draws[int(0.95 * reps) - 1]


def run_job(label: str, policy: str, args: Any) -> JobFigures:
    from rollout.driver import RolloutConfig, RolloutJob
    from rollout.store import TrajectoryStore

    work = tempfile.mkdtemp(prefix="halo-search-job-")
    config = RolloutConfig(store_url=work, tasks=args.tasks, policy=policy, llm=REALTIME, episodes=args.episodes,
                           replicas=args.cpus, run_id=f"search-job-{label}", progress=False,
                           llm_rpm=args.llm_rpm or None, llm_concurrency=args.llm_concurrency or None)
    summary = RolloutJob(config).run()
    records = TrajectoryStore(work).read_episodes([config.run_id])
    ends = [r.created_at + r.wall_s for r in records]
    walls = sorted(r.wall_s for r in records)
    return JobFigures(label, policy, len(records), summary.run_s, steady_gaps(ends, args.trim),
                      summary.worker_cpu_s, sum(r.total_llm_calls for r in records) / max(1, len(records)),
                      walls[len(walls) // 2] if walls else float("nan"),
                      sum(bool(r.success_oracle) for r in records) / max(1, len(records)),
                      summary.max_in_flight, args.cpus)


def judge(lower: float) -> tuple[str, bool]:
    ok = lower == lower and lower >= TARGET_RATIO  # NaN (no figure) fails
    return (f"episodes/s per CPU, search / greedy, lower bound {lower:.3f} (target >= {TARGET_RATIO:g}): "
            f"{'met' if ok else 'NOT met'}"), ok


def run(args: Any, jobs: list[tuple[str, str]]) -> dict[str, Any]:
    """Run each (label, policy) job on one in-process Ray cluster; the figures and the judgement."""
    from cluster.ray_cluster import shutdown, start_or_join

    handle = start_or_join(num_cpus=args.cpus)
    time.sleep(2)
    try:
        figures = {label: run_job(label, policy, args) for label, policy in jobs}
    finally:
        shutdown(handle)
    out: dict[str, Any] = {label: f.row() for label, f in figures.items()}
    for label in figures:
        if label != "greedy":
            point, lower, upper = ratio_bounds(figures[label], figures["greedy"])
            out[f"{label}_per_cpu_ratio"] = {"ratio": round(point, 3), "lower": round(lower, 3),
                                             "upper": round(upper, 3)}
    return out

"""Search over agent choices vs the greedy policy it searches with, on generated hard and extreme tasks.

Every task runs twice with the same seed, in the same simulated world: once greedy (`--greedy`,
default rules+scripted) and once with search (`--search`, whose prior is the greedy policy). Per
level, from the paired episodes:

- LLM calls per episode, search / greedy: target <= 2 (upper 95% bound, delta method), counted as
  a real run pays them: the recorded calls plus the call that writes the first draft, which the
  simulated world makes for free (train/accounting.py, the rule Table 2 uses); the ratio without
  that call is printed beside it;
- oracle success, search - greedy: target >= +15 points at extreme, +10 at hard (lower 95% bound
  of the paired difference);
- accepted-but-wrong (the validator accepted, the oracle did not), search vs greedy: target at
  most half the greedy rate (upper 95% bound of search - greedy/2, paired).

Bounds are one-sided 95% (normal, paired standard errors). A pair an infrastructure failure
interrupts (a solver that crashed, never an outcome) is left out and replaced by the level's next
task. The exit code is 1 when any printed target is not met or cannot be computed, when a level
runs out of tasks before `--per-level` pairs, or when an episode breaks. SIMULATED
(llm_backend=sim), never real-LLM figures.

    halo tasks generate all --difficulty hard,extreme --count 40 --seed 29 --out sets/search
    python benchmarks/search.py --tasks gen:sets/search --per-level 400     # the full run
    python benchmarks/search.py --tasks gen:sets/search --per-level 60      # a first look
    halo sim world --worlds 3 --world-seed 5 --out sets/worlds              # worlds nobody tuned
    python benchmarks/search.py --tasks gen:sets/search --per-level 60 --world sets/worlds/family-s5-w0.yaml
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import solvers  # noqa: E402
from rollout.core.trajectory import EpisodeRecord, is_infra_failure  # noqa: E402
from rollout.loop.episode import EpisodeConfig, run_episode  # noqa: E402
from rollout.policies import make_policy  # noqa: E402
from rollout.sim import SimConfig  # noqa: E402
from rollout.sim.world_file import WorldFileError, default_world, load_world  # noqa: E402
from rollout.tasks import Task, load_tasks  # noqa: E402
from train.accounting import paid_llm_calls  # noqa: E402
from train.targets import Z_ONE_SIDED_95, mean_se, paired_ratio  # noqa: E402

SUCCESS_TARGETS = {"extreme": 0.15, "hard": 0.10}
MAX_CALL_RATIO = 2.0


@dataclass(frozen=True)
class Pair:
    task_id: str
    level: str
    greedy: EpisodeRecord
    search: EpisodeRecord


def _success(r: EpisodeRecord) -> float:
    return 1.0 if r.success_oracle else 0.0


def _wrong(r: EpisodeRecord) -> float:
    return 1.0 if r.success_validator and not r.success_oracle else 0.0


def level_figures(pairs: list[Pair]) -> dict[str, float]:
    """The paired figures of one level (means, differences, one-sided 95% bounds)."""
    n = len(pairs)
    paid = paired_ratio([paid_llm_calls(p.greedy) for p in pairs], [paid_llm_calls(p.search) for p in pairs])
    recorded = paired_ratio([p.greedy.total_llm_calls for p in pairs], [p.search.total_llm_calls for p in pairs])
    diff, se_diff = mean_se([_success(p.search) - _success(p.greedy) for p in pairs])
    half, se_half = mean_se([_wrong(p.search) - 0.5 * _wrong(p.greedy) for p in pairs])
    return {"pairs": n, "greedy_calls": paid[0], "search_calls": paid[1], "call_ratio": paid[2],
            "call_ratio_upper": paid[3], "call_ratio_recorded": recorded[2], "call_ratio_recorded_upper": recorded[3],
            "greedy_success": sum(_success(p.greedy) for p in pairs) / n,
            "search_success": sum(_success(p.search) for p in pairs) / n,
            "success_diff": diff, "success_diff_se": se_diff, "success_diff_lower": diff - Z_ONE_SIDED_95 * se_diff,
            "greedy_wrong": sum(_wrong(p.greedy) for p in pairs) / n,
            "search_wrong": sum(_wrong(p.search) for p in pairs) / n,
            "wrong_vs_half_greedy": half, "wrong_vs_half_greedy_upper": half + Z_ONE_SIDED_95 * se_half}


def judge(figures: dict[str, dict[str, float]]) -> tuple[list[str], bool]:
    """Lines to print, and whether every target is met; a level missing or a NaN bound fails."""
    lines, ok = [], True
    for level, target in SUCCESS_TARGETS.items():
        f = figures.get(level)
        if not f:
            lines.append(f"{level}: no pairs: every target NOT met")
            ok = False
            continue
        recorded = f.get("call_ratio_recorded")
        without = f" [without the draft: {recorded:.2f}]" if recorded is not None else ""
        checks = [(f"LLM calls/episode ratio {f['call_ratio']:.2f} (upper bound {f['call_ratio_upper']:.2f}){without} "
                   f"<= {MAX_CALL_RATIO:g}", f["call_ratio_upper"] <= MAX_CALL_RATIO),
                  (f"oracle success {100 * f['greedy_success']:.1f}% -> {100 * f['search_success']:.1f}%, "
                   f"diff {100 * f['success_diff']:+.1f} +- {100 * f['success_diff_se']:.1f} points (lower bound "
                   f"{100 * f['success_diff_lower']:+.1f}) >= +{100 * target:.0f}", f["success_diff_lower"] >= target),
                  (f"accepted-but-wrong {100 * f['greedy_wrong']:.1f}% -> {100 * f['search_wrong']:.1f}% (search - "
                   f"greedy/2 upper bound {100 * f['wrong_vs_half_greedy_upper']:+.1f} points) <= 0",
                   f["wrong_vs_half_greedy_upper"] <= 0.0)]
        for text, met in checks:
            met = bool(met)  # a NaN comparison is False: a figure that cannot be computed fails
            lines.append(f"{level}: {text}: {'met' if met else 'NOT met'}")
            ok = ok and met
    return lines, ok


@dataclass
class RunCounts:
    dropped: int = 0  # pairs lost to an infrastructure failure (never outcomes), replaced where tasks are left
    broken: int = 0  # episodes that broke (a defect: the run fails)


async def run_pairs(tasks: list[tuple[str, Task]], greedy: str, search: str, seed: int, concurrency: int,
                    sim: SimConfig | None = None, first_index: int = 0) -> tuple[list[Pair], RunCounts]:
    """Each task greedy then search, on the world seed `seed + first_index + i`; the pairs without
    an infrastructure failure, and what was lost."""
    sem = asyncio.Semaphore(concurrency)
    config = EpisodeConfig(seed=seed, run_id="bench-search", sim=sim or SimConfig(latency_scale=0.0))

    async def one(i: int, level: str, task: Task) -> Pair:
        async with sem:
            cfg = EpisodeConfig(**{**config.__dict__, "seed": seed + i})
            g = await run_episode(task, make_policy(greedy, seed=seed + i), cfg)
            s = await run_episode(task, make_policy(search, seed=seed + i), cfg)
            return Pair(task.task_id, level, g, s)

    pairs = await asyncio.gather(*(one(first_index + i, level, t) for i, (level, t) in enumerate(tasks)))
    broken = [r for p in pairs for r in (p.greedy, p.search) if r.error]
    for r in broken[:3]:
        print(f"episode {r.episode_id} ({r.policy_name}) broke: {r.error.splitlines()[0]}", file=sys.stderr)
    lost = [(p, r) for p in pairs for r in (p.greedy, p.search) if is_infra_failure(r)]
    for p, r in lost[:5]:
        print(f"pair dropped, {p.level} task {p.task_id} ({r.policy_name}): {r.infra_error.splitlines()[0][:200]}",
              file=sys.stderr)
    kept = [p for p in pairs if not (is_infra_failure(p.greedy) or is_infra_failure(p.search))]
    return kept, RunCounts(len(pairs) - len(kept), len(broken))


async def run_levels(levels: dict[str, list[Task]], per_level: int, greedy: str, search: str, seed: int,
                     concurrency: int, sim: SimConfig | None = None) -> tuple[list[Pair], RunCounts]:
    """`per_level` pairs per level, in each level's order: a pair lost to an infrastructure failure
    is replaced by the level's next task (on a seed of its own) while the level has tasks left."""
    kept: list[Pair] = []
    counts, taken, index = RunCounts(), dict.fromkeys(levels, 0), 0
    while True:
        batch = []
        for level, tasks in levels.items():
            more = tasks[taken[level]:taken[level] + max(0, per_level - sum(p.level == level for p in kept))]
            batch += [(level, t) for t in more]
            taken[level] += len(more)
        if not batch:
            return kept, counts
        got, lost = await run_pairs(batch, greedy, search, seed, concurrency, sim, first_index=index)
        index += len(batch)
        kept += got
        counts = RunCounts(counts.dropped + lost.dropped, counts.broken + lost.broken)


def shuffled_levels(spec: str, levels: list[str], seed: int) -> dict[str, list[Task]]:
    """Every task of each level, in the order the benchmark takes them."""
    out = {}
    for level in levels:
        tasks = load_tasks(f"{spec}:level={level}")
        random.Random(seed).shuffle(tasks)
        out[level] = tasks
    return out


def load_levels(spec: str, levels: list[str], per_level: int, seed: int) -> list[tuple[str, Task]]:
    return [(level, t) for level, tasks in shuffled_levels(spec, levels, seed).items() for t in tasks[:per_level]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True, help="a generated set, gen:DIR, holding hard and extreme tasks")
    ap.add_argument("--per-level", type=int, default=400)
    ap.add_argument("--greedy", default="rules+scripted")
    ap.add_argument("--search", default="search:prior=rules+scripted,width=3,max_calls=20")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--world", help="a world file (halo sim world --dump or --worlds); default: the default world")
    args = ap.parse_args(argv)
    try:
        world = load_world(args.world) if args.world else default_world()
    except WorldFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sim = SimConfig.from_world(world, latency_scale=0.0)
    solvers.configure_cache(True)  # branches re-plan the same PDDL; both policies get the cache
    levels = shuffled_levels(args.tasks, list(SUCCESS_TARGETS), args.seed)
    t0 = time.monotonic()
    pairs, counts = asyncio.run(run_levels(levels, args.per_level, args.greedy, args.search, args.seed,
                                           args.concurrency, sim))
    figures = {level: level_figures([p for p in pairs if p.level == level])
               for level in SUCCESS_TARGETS if any(p.level == level for p in pairs)}
    short = {level: n for level in SUCCESS_TARGETS if (n := sum(p.level == level for p in pairs)) < args.per_level}
    print(f"SIMULATED world {world.name!r} ({sim.world_hash}, llm_backend=sim, LLM latency not simulated, so "
          f"a search's wall-time budget binds on solver time alone); {args.greedy} vs {args.search}; "
          f"{len(pairs)} pairs; {counts.dropped} lost to infrastructure failures (replaced by further tasks "
          f"of their level while it had any); {counts.broken} broken episodes; {time.monotonic() - t0:.0f} s")
    lines, ok = judge(figures)
    lines += [f"{level}: {n} pairs, fewer than --per-level {args.per_level} (the level ran out of tasks): NOT met"
              for level, n in short.items()]
    print("\n".join(lines))
    print(json.dumps({"figures": figures, "dropped": counts.dropped, "broken": counts.broken}))
    return 0 if ok and not short and not counts.broken else 1


if __name__ == "__main__":
    sys.exit(main())

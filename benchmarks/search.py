"""Search over agent choices vs the greedy policy it searches with, on generated hard and extreme tasks.

Every task runs twice with the same seed, in the same simulated world: once greedy (`--greedy`,
default rules+scripted) and once with search (`--search`, whose prior is the greedy policy). Per
level, from the paired episodes (infrastructure failures drop the pair and are counted):

- LLM calls per episode, search / greedy: target <= 2 (upper 95% bound, delta method), counted as
  a real run pays them: the recorded calls plus the call that writes the first draft, which the
  simulated world makes for free (train/accounting.py, the rule Table 2 uses); the ratio without
  that call is printed beside it;
- oracle success, search - greedy: target >= +15 points at extreme, +10 at hard (lower 95% bound
  of the paired difference);
- accepted-but-wrong (the validator accepted, the oracle did not), search vs greedy: target at
  most half the greedy rate (upper 95% bound of search - greedy/2, paired).

Bounds are one-sided 95% (normal, paired standard errors). The exit code is 1 when any printed
target is not met or cannot be computed. SIMULATED (llm_backend=sim), never real-LLM figures.

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
from train.targets import Z_ONE_SIDED_95, mean_se  # noqa: E402

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


def _call_ratio(greedy: list[int], search: list[int]) -> tuple[float, float, float, float]:
    """(greedy's mean, search's mean, their ratio, its upper 95% bound by the delta method)."""
    mean_g, mean_s = sum(greedy) / len(greedy), sum(search) / len(search)
    if not mean_g:
        return mean_g, mean_s, float("nan"), float("nan")
    ratio = mean_s / mean_g
    _, se_lin = mean_se([s - ratio * g for s, g in zip(search, greedy, strict=True)])
    return mean_g, mean_s, ratio, ratio + Z_ONE_SIDED_95 * se_lin / mean_g


def level_figures(pairs: list[Pair]) -> dict[str, float]:
    """The paired figures of one level (means, differences, one-sided 95% bounds)."""
    n = len(pairs)
    paid = _call_ratio([paid_llm_calls(p.greedy) for p in pairs], [paid_llm_calls(p.search) for p in pairs])
    recorded = _call_ratio([p.greedy.total_llm_calls for p in pairs], [p.search.total_llm_calls for p in pairs])
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


async def run_pairs(tasks: list[tuple[str, Task]], greedy: str, search: str, seed: int, concurrency: int,
                    sim: SimConfig | None = None) -> tuple[list[Pair], int]:
    sem = asyncio.Semaphore(concurrency)
    config = EpisodeConfig(seed=seed, run_id="bench-search", sim=sim or SimConfig(latency_scale=0.0))

    async def one(i: int, level: str, task: Task) -> Pair:
        async with sem:
            cfg = EpisodeConfig(**{**config.__dict__, "seed": seed + i})
            g = await run_episode(task, make_policy(greedy, seed=seed + i), cfg)
            s = await run_episode(task, make_policy(search, seed=seed + i), cfg)
            return Pair(task.task_id, level, g, s)

    pairs = await asyncio.gather(*(one(i, level, t) for i, (level, t) in enumerate(tasks)))
    broken = [r for p in pairs for r in (p.greedy, p.search) if r.error]
    for r in broken[:3]:
        print(f"episode {r.episode_id} ({r.policy_name}) broke: {r.error.splitlines()[0]}", file=sys.stderr)
    kept = [p for p in pairs if not (is_infra_failure(p.greedy) or is_infra_failure(p.search))]
    return kept, len(pairs) - len(kept) + len(broken)


def load_levels(spec: str, levels: list[str], per_level: int, seed: int) -> list[tuple[str, Task]]:
    out = []
    for level in levels:
        tasks = load_tasks(f"{spec}:level={level}")
        random.Random(seed).shuffle(tasks)
        out += [(level, t) for t in tasks[:per_level]]
    return out


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
    tasks = load_levels(args.tasks, list(SUCCESS_TARGETS), args.per_level, args.seed)
    t0 = time.monotonic()
    pairs, dropped = asyncio.run(run_pairs(tasks, args.greedy, args.search, args.seed, args.concurrency, sim))
    figures = {level: level_figures([p for p in pairs if p.level == level])
               for level in SUCCESS_TARGETS if any(p.level == level for p in pairs)}
    print(f"SIMULATED world {world.name!r} ({sim.world_hash}, llm_backend=sim); {args.greedy} vs {args.search}; "
          f"{len(pairs)} pairs, "
          f"{dropped} dropped (infrastructure failures or broken episodes); {time.monotonic() - t0:.0f} s")
    lines, ok = judge(figures)
    print("\n".join(lines))
    print(json.dumps({"figures": figures, "dropped": dropped}))
    return 0 if ok and not dropped else 1


if __name__ == "__main__":
    sys.exit(main())

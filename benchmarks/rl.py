"""RL from verifier reward vs the supervised fast policy it starts from, on held-out tasks and domains.

Stages (one process, SIMULATED world, llm_backend=sim; never real-LLM figures):
1. split: `--holdout-domains` whole domains (default: the first two of the set's domains ordered by
   a hash of the seed, never by how they score) are kept out of everything; of the rest, a hash
   split by task ID keeps 30% of the tasks out (at least one per domain).
2. the supervised start: `--teacher` episodes on the training tasks, the validator filter, the fast
   policy fitted on them (train.fast_policy.train_fast_policy);
3. RL from it on the training tasks (train.rl_loop.run_rl, settings printed); with `--advantage exit`
   (expert iteration, train/rl_exit.py) one iteration searches every training task twice by default;
4. both policies, each behind the rules layer and deciding by argmax, on the held-out tasks and
   on the held-out domains, the same seeds: paired episodes (an infrastructure failure on either
   side drops the pair and is counted).

Targets (one-sided 95% bounds, normal, paired standard errors):
- held-out tasks: oracle success, RL - start, lower bound >= +5 points;
- held-out tasks: LLM calls per episode, RL / start, upper bound <= 1.0 (delta method): "equal or
  fewer calls" means the ratio's bound, not its point estimate, is at most 1;
- held-out domains: oracle success, RL - start, lower bound >= -2 points (not worse).
Exit code 1 when any printed target is not met or cannot be computed, or a pair was dropped.
`--headroom` also prints, with no target, how far greedy policies get in the world: the simulated
teacher that reads the hidden faults, and the fast policy fitted on its episodes.

    halo tasks generate all --difficulty hard,extreme --count 40 --seed 29 --out sets/gen
    python benchmarks/rl.py --tasks gen:sets/gen --out /tmp/rl-bench            # the stated size
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import zlib
from dataclasses import asdict, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rollout.core.trajectory import EpisodeRecord, is_infra_failure, outcome_pairs  # noqa: E402
from rollout.llm.spec import is_sim_spec  # noqa: E402
from rollout.tasks import Task, load_tasks  # noqa: E402
from train.pipeline import domain_key, run_policy, split_tasks  # noqa: E402
from train.targets import Z_ONE_SIDED_95, mean_se, paired_ratio  # noqa: E402

HELD_OUT_TASKS_GAIN = 0.05
MAX_CALL_RATIO = 1.0
HELD_OUT_DOMAINS_FLOOR = -0.02
# --headroom's reference: the simulated prompted teacher answering right every time (it reads the
# world's hidden faults); a yardstick of the world, never a policy a real run could have
ORACLE_TEACHER = "rules+teacher:model=sim,quality=1.0,unparsable=0"


def _ok(r: EpisodeRecord) -> float:
    return 1.0 if r.success_oracle else 0.0


def paired_figures(start: list[EpisodeRecord], rl: list[EpisodeRecord]) -> dict[str, float]:
    """Oracle success and LLM calls of paired episodes (same task, same seed), RL against start."""
    n = len(start)
    if not n:
        return {"pairs": 0.0}
    diff, se = mean_se([_ok(b) - _ok(a) for a, b in zip(start, rl, strict=True)])
    mean_a, mean_b, ratio, ratio_upper = paired_ratio([a.total_llm_calls for a in start],
                                                      [b.total_llm_calls for b in rl])
    return {"pairs": float(n), "start_success": sum(map(_ok, start)) / n, "rl_success": sum(map(_ok, rl)) / n,
            "success_diff": diff, "success_diff_se": se, "success_diff_lower": diff - Z_ONE_SIDED_95 * se,
            "start_calls": mean_a, "rl_calls": mean_b, "call_ratio": ratio,
            "call_ratio_upper": ratio_upper}


def judge(figures: dict[str, dict[str, float]]) -> tuple[list[str], bool]:
    """Lines to print and whether every target is met (a missing set or a NaN bound fails)."""
    tasks, domains = figures.get("held_out_tasks", {}), figures.get("held_out_domains", {})
    checks = [
        ("held-out tasks: oracle success", tasks, "success_diff_lower", lambda v: v >= HELD_OUT_TASKS_GAIN,
         f">= +{100 * HELD_OUT_TASKS_GAIN:.0f} points"),
        ("held-out tasks: LLM calls/episode ratio RL/start", tasks, "call_ratio_upper",
         lambda v: v <= MAX_CALL_RATIO, f"<= {MAX_CALL_RATIO:g}"),
        ("held-out domains: oracle success", domains, "success_diff_lower", lambda v: v >= HELD_OUT_DOMAINS_FLOOR,
         f">= {100 * HELD_OUT_DOMAINS_FLOOR:+.0f} points"),
    ]
    lines, ok = [], True
    for label, f, key, test, target in checks:
        value = f.get(key, math.nan)
        met = bool(f.get("pairs")) and not math.isnan(value) and bool(test(value))
        ok = ok and met
        lines.append(f"{label}: {_describe(f, key)} {target}: {'met' if met else 'NOT met'}")
    return lines, ok


def _describe(f: dict[str, float], key: str) -> str:
    if not f.get("pairs"):
        return "no pairs;"
    if key == "call_ratio_upper":
        return (f"{f['start_calls']:.2f} -> {f['rl_calls']:.2f}, ratio {f['call_ratio']:.3f} "
                f"(upper bound {f['call_ratio_upper']:.3f})")
    return (f"{100 * f['start_success']:.1f}% -> {100 * f['rl_success']:.1f}%, diff {100 * f['success_diff']:+.1f} "
            f"+- {100 * f['success_diff_se']:.1f} (lower bound {100 * f['success_diff_lower']:+.1f}) over "
            f"{int(f['pairs'])} pairs")


def split(tasks: list[Task], holdout: list[str], seed: int, fraction: float
          ) -> tuple[list[Task], list[Task], list[Task]]:
    """(training tasks, held-out tasks of the training domains, tasks of the held-out domains)."""
    domains = sorted({domain_key(t) for t in tasks})
    unknown = [d for d in holdout if d not in domains]
    if unknown:
        raise SystemExit(f"error: --holdout-domains {', '.join(unknown)}: not in the set ({', '.join(domains)})")
    rest = [t for t in tasks if domain_key(t) not in holdout]
    train, held = split_tasks(rest, fraction, seed)
    return train, held, [t for t in tasks if domain_key(t) in holdout]


def default_holdout(tasks: list[Task], seed: int, count: int = 2) -> list[str]:
    return sorted({domain_key(t) for t in tasks}, key=lambda d: zlib.crc32(f"{seed}|{d}".encode()))[:count]


def _sample(tasks: list[Task], n: int, seed: int) -> list[Task]:
    return sorted(tasks, key=lambda t: zlib.crc32(f"{seed}|{t.task_id}".encode()))[:n]


def evaluate(tasks: list[Task], start_dir: Path, rl_dir: Path, seeds: list[int], llm: str, concurrency: int
             ) -> tuple[dict[str, float], int]:
    """Paired figures of the two policies on tasks x seeds, and the pairs dropped (no tasks: no
    pairs, which fails the set's target)."""
    if not tasks:
        return paired_figures([], []), 0
    a = run_policy(tasks, f"rules+model:{start_dir}", seeds, "rl-bench-start", concurrency, llm=llm).records
    b = run_policy(tasks, f"rules+model:{rl_dir}", seeds, "rl-bench-rl", concurrency, llm=llm).records
    kept = outcome_pairs(a, b)
    return paired_figures([x for x, _ in kept], [y for _, y in kept]), len(a) - len(kept)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True, help="task spec, e.g. gen:DIR (generated hard and extreme tasks)")
    ap.add_argument("--out", required=True, help="working directory (start and RL artifacts, checkpoints)")
    ap.add_argument("--holdout-domains", default="", help="comma-separated family/domain keys (default: 2 by hash)")
    ap.add_argument("--teacher", default="rules+teacher:model=sim", help="the supervised start's data")
    ap.add_argument("--train-tasks", type=int, default=120, help="training tasks used (a hash sample)")
    ap.add_argument("--teacher-seeds", type=int, default=2)
    ap.add_argument("--eval-tasks", type=int, default=120, help="held-out tasks evaluated (a hash sample)")
    ap.add_argument("--eval-domain-tasks", type=int, default=80, help="0: held-out tasks only (a dev run)")
    ap.add_argument("--eval-seeds", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=0, help="0: 8 (1 with --advantage exit)")
    ap.add_argument("--tasks-per-iter", type=int, default=0, help="0: 20 (every training task with exit)")
    ap.add_argument("--group", type=int, default=0, help="episodes per task (0: 4 with --advantage group, "
                                                          "1 with fork, 2 with exit)")
    ap.add_argument("--price-per-call", type=float, default=0.02)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--pull", type=float, default=0.05)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--adv-norm", default="none")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--clip", type=float, default=0.0)
    ap.add_argument("--entropy", type=float, default=0.0)
    ap.add_argument("--max-kl", type=float, default=0.0)
    ap.add_argument("--advantage", default="group", help="group, fork (per-state advantages from forks) or exit "
                                                         "(expert iteration on the search's accepted paths)")
    ap.add_argument("--fork-k", type=int, default=3)
    ap.add_argument("--fork-states", type=int, default=2)
    ap.add_argument("--fork-samples", type=int, default=1)
    ap.add_argument("--exit-calls", type=int, default=20, help="--advantage exit: the search's LLM-call budget "
                    "per training episode")
    ap.add_argument("--llm", default="sim:scale=0")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--headroom", action="store_true", help="also the world's greedy headroom on the held-out "
                    "tasks (informational, no target): a simulated teacher that sees the hidden faults and the "
                    "fast policy fitted on its episodes")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object at the end")
    args = ap.parse_args(argv)
    if args.headroom and not is_sim_spec(args.llm):
        ap.error("--headroom needs the simulated world (--llm sim...): its yardstick reads the world's hidden faults")
    exit_mode = args.advantage == "exit"
    args.group = args.group or {"fork": 1, "exit": 2}.get(args.advantage, 4)
    args.iterations = args.iterations or (1 if exit_mode else 8)
    args.tasks_per_iter = args.tasks_per_iter or (args.train_tasks if exit_mode else 20)
    return args


def success_rate(tasks: list[Task], spec: str, seeds: list[int], run_id: str, llm: str, concurrency: int
                 ) -> tuple[float, int]:
    """Oracle success of a policy on tasks x seeds, infrastructure failures and broken episodes left out."""
    kept = [r for r in run_policy(tasks, spec, seeds, run_id, concurrency, llm=llm).records
            if not (is_infra_failure(r) or r.error)]
    return (sum(map(_ok, kept)) / len(kept) if kept else math.nan), len(kept)


def headroom(train: list[Task], held: list[Task], seeds: list[int], args: argparse.Namespace, out: Path
             ) -> dict[str, float]:
    """How far a greedy policy could go in this world: the simulated teacher that always names the
    agent repairing the fault reported first (it reads the world's hidden faults, which no policy
    sees), and the fast policy fitted on that teacher's episodes exactly as the start is fitted on
    `--teacher`'s (what imitation reaches from labels that good, with the policy's own features)."""
    oracle, n = success_rate(held, ORACLE_TEACHER, seeds, "rl-bench-oracle", args.llm, args.concurrency)
    clone_args = argparse.Namespace(**{**vars(args), "teacher": ORACLE_TEACHER})
    clone_dir = supervised_start(train, clone_args, out / "oracle-clone")
    clone, m = success_rate(held, f"rules+model:{clone_dir}", seeds, "rl-bench-oracle-clone", args.llm,
                            args.concurrency)
    return {"oracle_greedy_success": oracle, "oracle_greedy_episodes": float(n), "oracle_clone_success": clone,
            "oracle_clone_episodes": float(m)}


def headroom_line(room: dict[str, float], tasks: dict[str, float]) -> str:
    start = tasks.get("start_success", math.nan)
    return (f"headroom on held-out tasks (informational, no target): greedy with the hidden faults "
            f"{100 * room['oracle_greedy_success']:.1f}% ({100 * (room['oracle_greedy_success'] - start):+.1f} over "
            f"the start's {100 * start:.1f}%), the fast policy fitted on its episodes "
            f"{100 * room['oracle_clone_success']:.1f}% ({100 * (room['oracle_clone_success'] - start):+.1f})")


def supervised_start(train: list[Task], args: argparse.Namespace, out: Path) -> Path:
    from train.fast_policy import train_fast_policy

    start_dir = out / "start"
    if not (start_dir / "manifest.json").is_file():  # a rerun reuses it (and resumes RL)
        seeds = [1000 + s for s in range(args.teacher_seeds)]
        episodes = run_policy(train, args.teacher, seeds, "rl-bench-teacher", args.concurrency, llm=args.llm).records
        train_fast_policy([e for e in episodes if not is_infra_failure(e)], start_dir, check="validator",
                          name="start")
    return start_dir


def main(argv: list[str] | None = None) -> int:
    from train.rl_loop import RLSettings, run_rl

    args = _args(argv)
    t0 = time.monotonic()
    tasks = load_tasks(args.tasks)
    holdout = [d for d in args.holdout_domains.split(",") if d] or default_holdout(tasks, args.seed)
    train, held, domains = split(tasks, holdout, args.seed, 0.3)
    train = _sample(train, args.train_tasks, args.seed)
    out = Path(args.out)
    start_dir = supervised_start(train, args, out)
    settings = RLSettings(tasks="", **{f.name: getattr(args, f.name) for f in fields(RLSettings) if f.name != "tasks"})
    run_rl(settings, start_dir, out / "rl", log=lambda line: print(line, file=sys.stderr), tasks=train)
    seeds = [2000 + s for s in range(args.eval_seeds)]
    figures, dropped = {}, 0
    for name, subset, n in (("held_out_tasks", held, args.eval_tasks), ("held_out_domains", domains,
                                                                         args.eval_domain_tasks)):
        figures[name], d = evaluate(_sample(subset, n, args.seed), start_dir, out / "rl", seeds, args.llm,
                                    args.concurrency)
        dropped += d
    print(f"SIMULATED world ({args.llm}); supervised start ({args.teacher} data, {len(train)} training tasks) vs "
          f"RL ({asdict(settings)}); held-out domains {', '.join(holdout)}; {dropped} pairs dropped; "
          f"{time.monotonic() - t0:.0f} s")
    lines, code = verdict(figures, dropped)
    if args.headroom:
        figures["headroom"] = headroom(train, _sample(held, args.eval_tasks, args.seed), seeds, args, out)
        lines.append(headroom_line(figures["headroom"], figures["held_out_tasks"]))
    print("\n".join(lines))
    if args.json:
        print(json.dumps({"figures": figures, "dropped": dropped, "holdout_domains": holdout}))
    return code


def verdict(figures: dict[str, dict[str, float]], dropped: int) -> tuple[list[str], int]:
    """The lines to print and the exit code: 1 when a target fails or a pair was dropped."""
    lines, ok = judge(figures)
    if dropped:
        lines.append(f"{dropped} pairs dropped (infrastructure failures or broken episodes): NOT met")
    return lines, 0 if ok and not dropped else 1


if __name__ == "__main__":
    sys.exit(main())

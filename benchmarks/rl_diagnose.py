"""What one RL iteration's batch looks like and what one update does to it (SIMULATED world).

Builds (or reuses) the supervised start exactly as benchmarks/rl.py does for the same --tasks,
--out and --seed, runs the first iteration's rollouts (train.rl_loop, the rules layer first, the
model's agent sampled at --temperature) and prints one JSON object:
- model and rule steps, and whether the sampled agent's probability recomputed from the stored
  state matches the one the sampler printed (the gradient sees what the policy saw);
- the sampling entropy at the model's steps, the share of sampled agents that are not the argmax,
  and the share of groups whose advantages are not all 0;
- oracle success of the episodes that kept to the argmax and of those that deviated;
- after one update with --lr and --pull: the mean KL from the sampler at the batch's states, the
  share of those states whose argmax changed, and the mean change of the drawn agent's
  log-probability where the advantage was positive and where it was negative.

    python benchmarks/rl_diagnose.py --tasks gen:DIR --out /tmp/rl-dev --seed 7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import rl as bench  # noqa: E402

from rollout.core.state import EpisodeState  # noqa: E402
from rollout.core.trajectory import EpisodeRecord  # noqa: E402
from rollout.tasks import load_tasks  # noqa: E402
from train.rl import Batch, LinearWeights, batch_diagnostics, batch_steps, group_advantages, mean_kl, rl_update  # noqa: E402
from train.rl_loop import RLSettings, _iteration_tasks, _rollouts  # noqa: E402


def sampler_matches(params: LinearWeights, records: list[EpisodeRecord], temperature: float) -> tuple[int, int]:
    """(model steps whose printed sampling probability differs from the recomputed one by more
    than its rounding, model steps)."""
    bad = total = 0
    for record in records:
        for step in record.steps:
            found = re.search(r"p=([0-9.]+)", step.decision_reason or "")
            if step.decided_by != "model" or not found:
                continue
            state = EpisodeState.from_json(step.state_json)
            scores = params.scores(params.rows(params.bucket_ids(state))) / temperature
            p = np.exp(scores - scores.max())
            total += 1
            bad += abs(p[step.agent_id] / p.sum() - float(found.group(1))) > 0.006
    return bad, total


def update_effects(params: LinearWeights, batch: Batch, settings: RLSettings) -> dict[str, float]:
    """What one update does at the batch's model states."""
    extended, steps = batch_steps(params, batch, settings.temperature)
    new = rl_update(params, params, batch, lr=settings.lr, pull=settings.pull,
                    temperature=settings.temperature)
    _, after = batch_steps(new, batch, settings.temperature)
    change = np.array([b.old_logp - a.old_logp for a, b in zip(steps, after, strict=True)])
    adv = np.array([s.advantage for s in steps])
    moved = [int(np.argmax(a.old_logps)) != int(np.argmax(b.old_logps)) for a, b in zip(steps, after, strict=True)]
    return {"kl_one_update": mean_kl(new, steps, settings.temperature),
            "argmax_changed_share": float(np.mean(moved)) if moved else float("nan"),
            "dlogp_positive_advantage": float(change[adv > 0].mean()) if (adv > 0).any() else float("nan"),
            "dlogp_negative_advantage": float(change[adv < 0].mean()) if (adv < 0).any() else float("nan"),
            "off_argmax_share": float(np.mean([int(np.argmax(s.old_logps)) != s.agent for s in steps]))
            if steps else float("nan")}


def success_by_deviation(params: LinearWeights, batch: Batch, temperature: float) -> dict[str, float]:
    kept, deviated = [], []
    for scored in batch.scored:
        _, steps = batch_steps(params, Batch([scored]), temperature)
        off = any(int(np.argmax(s.old_logps)) != s.agent for s in steps)
        (deviated if off else kept).append(float(bool(scored.record.success_oracle)))
    return {"argmax_episodes": float(len(kept)), "argmax_success": float(np.mean(kept)) if kept else float("nan"),
            "deviating_episodes": float(len(deviated)),
            "deviating_success": float(np.mean(deviated)) if deviated else float("nan")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--out", required=True, help="benchmarks/rl.py's working directory (its start is reused)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--pull", type=float, default=0.05)
    args = ap.parse_args(argv)
    bargs = bench._args(["--tasks", args.tasks, "--out", args.out, "--seed", str(args.seed)])
    tasks = load_tasks(args.tasks)
    train, _, _ = bench.split(tasks, bench.default_holdout(tasks, args.seed), args.seed, 0.3)
    train = bench._sample(train, bargs.train_tasks, args.seed)
    start = LinearWeights.load(bench.supervised_start(train, bargs, Path(args.out)))
    settings = RLSettings(tasks="", seed=args.seed, temperature=args.temperature, lr=args.lr, pull=args.pull,
                          tasks_per_iter=bargs.tasks_per_iter, group=bargs.group)
    episodes = asyncio.run(_rollouts(_iteration_tasks(train, settings, 1), start, settings, 1))
    records = [r for _, r in episodes]
    batch = group_advantages(episodes, settings.price_per_call)
    bad, total = sampler_matches(start, records, settings.temperature)
    steps = [s.decided_by for r in records for s in r.steps]
    out = {"episodes": float(len(records)), "model_steps_total": float(steps.count("model")),
           "rule_steps": float(steps.count("rule")), "sampler_mismatches": float(bad), "sampler_checked": float(total),
           **batch_diagnostics(start, batch, settings.temperature), **update_effects(start, batch, settings),
           **success_by_deviation(start, batch, settings.temperature)}
    print("SIMULATED world (sim:scale=0): " + json.dumps({k: round(v, 4) for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How low Table 2's calls ratio can go in the simulated world: a yardstick for issue 26's 0.55x.

On the full pipeline's held-out tasks (benchmarks/halo_pipeline.py's task set and split), per
Table-2 family, two orchestrators run on the same tasks and seeds:

- the weaker prompted teacher, the ratio's denominator (`teacher:model=sim`, no rules layer);
- a chooser that reads the world's hidden faults and never errs, behind the free rules layer
  (`rules+teacher:model=sim,quality=1.0,unparsable=0`: the simulated teacher naming the agent
  that repairs the fault reported first, every time, one call per decision), which no trained
  policy can see.

Calls are counted the paper's way (train/accounting.py: the draft, one call per model decision,
one per LLM agent run); the chooser's ratio comes with its one-sided 95% lower bound (paired
episodes, delta method). The chooser's ratio shows what choosing right buys when each iteration
still runs one LLM agent. It is a yardstick, not a target: nothing here is judged. A pair where
either episode failed on infrastructure (a tool that cannot start) or broke is left out and
counted, and the exit code is then 1; it is 2 on bad input or when no pair is left, 0 otherwise.
SIMULATED (llm_backend=sim).

    python benchmarks/calls_floor.py --out /tmp/calls-floor
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))  # halo_pipeline's task sets

WEAKER = "teacher:model=sim"
CHOOSER = "rules+teacher:model=sim,quality=1.0,unparsable=0"
ORCHESTRATORS = (("weaker teacher", WEAKER), ("hidden-fault chooser", CHOOSER))  # the ratio's base, then its top
PAPER_TARGET = 0.55


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"want a whole number >= 1, got {text!r}")
    return int(text)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the generated task sets (default: a new temp folder)")
    ap.add_argument("--seeds", type=_positive, default=2, help="episodes per held-out task and orchestrator")
    ap.add_argument("--natural-plan", type=int, default=15, help="Natural Plan tasks per type and level")
    ap.add_argument("--classical-paper", type=int, default=30, help="classical-paper tasks per level")
    ap.add_argument("--llm", default="sim", help="the simulated world: sim or sim:world=FILE")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    return ap.parse_args(argv)


def held_out_split(args: argparse.Namespace, out: Path) -> list:
    """The full pipeline's held-out tasks (its task set, generated sets and split)."""
    from halo_pipeline import with_generated_sets

    from train.pipeline import PipelineConfig, PipelineResult, split_stage

    tasks, holdout = with_generated_sets("planbench:all:25,ipc:bundled", out, args.natural_plan,
                                         args.classical_paper)
    cfg = PipelineConfig(out=str(out), tasks=tasks, holdout_domains=holdout, llm=args.llm)
    return split_stage(cfg, PipelineResult(config={})).held_out


def paired_ratio(a: list[float], b: list[float]) -> tuple[float, float]:
    """mean(a) / mean(b) over paired episodes and its one-sided 95% lower bound: train.targets'
    delta-method bound mirrored below the ratio (-inf with fewer than two pairs)."""
    from train.targets import paired_ratio as ratio_with_upper

    _, _, ratio, upper = ratio_with_upper(b, a)
    return ratio, 2 * ratio - upper if len(a) >= 2 else -math.inf


def family_figures(tasks: list, seeds: list[int], args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Both orchestrators on tasks x seeds, over the pairs where both ended on an outcome (an
    infrastructure failure or a broken episode drops its pair, counted in `dropped`)."""
    from rollout.core.infra import InfraFailure
    from rollout.core.trajectory import outcome_pairs
    from train.accounting import DRAFT_CALLS, episode_calls
    from train.pipeline import run_policy

    runs = [run_policy(tasks, spec, seeds, f"calls-floor-{name}", args.concurrency, args.llm).records
            for name, spec in ORCHESTRATORS]
    pairs = outcome_pairs(*runs)
    if not pairs:
        reason = next((r.infra_error for run in runs for r in run if r.infra_error), "broken episodes")
        raise InfraFailure("infrastructure", f"none of {len(runs[0])} episode pairs ended on an outcome: {reason}")
    figures: dict[str, dict[str, float]] = {}
    calls = []
    for (name, _), records in zip(ORCHESTRATORS, zip(*pairs, strict=True), strict=True):
        figures[name] = _account(list(records))
        calls.append([float(DRAFT_CALLS + sum(episode_calls(r))) for r in records])
    ratio, lower = paired_ratio(calls[1], calls[0])
    figures["ratio"] = {"llm_calls": ratio, "lower": lower, "dropped": float(len(runs[0]) - len(pairs))}
    return figures


def _account(records: list) -> dict[str, float]:
    from train.accounting import Orchestrator, account

    acc = account(records, Orchestrator("none"), 0.0)
    return {"episodes": acc.episodes, "oracle_success": acc.oracle_success, "iterations": acc.iterations,
            "llm_calls": acc.llm_calls, "decision_calls": acc.decision_calls, "agent_calls": acc.agent_calls}


def dropped_pairs(by_family: dict[str, dict[str, dict[str, float]]]) -> dict[str, int]:
    """The families where pairs were left out (infrastructure failures, broken episodes), and how many."""
    return {fam: int(f["ratio"]["dropped"]) for fam, f in by_family.items() if f["ratio"]["dropped"]}


def format_rows(by_family: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["| family | orchestrator | episodes | oracle success | iterations "
             "| LLM calls (decisions + agents + draft) |",
             "|---|---|---|---|---|---|"]
    for fam, figures in by_family.items():
        for name, _ in ORCHESTRATORS:
            f = figures[name]
            lines.append(f"| {fam} | {name} | {f['episodes']} | {f['oracle_success']:.1%} | {f['iterations']:.2f} | "
                         f"{f['llm_calls']:.2f} ({f['decision_calls']:.2f} + {f['agent_calls']:.2f} + 1) |")
    ratios = ", ".join(f"{fam} {f['ratio']['llm_calls']:.3f}x (lower {f['ratio']['lower']:.3f})"
                       for fam, f in by_family.items())
    lines.append(f"calls ratio, hidden-fault chooser / weaker teacher: {ratios} "
                 f"(no target here; Table 2's is <= {PAPER_TARGET}x for the trained policy)")
    dropped = dropped_pairs(by_family)
    if dropped:
        lines.append("pairs dropped (an infrastructure failure or a broken episode, not an outcome): "
                     + ", ".join(f"{fam} {n}" for fam, n in dropped.items()) + "; the figures stand on fewer pairs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from rollout.sim.spec import sim_config_for
    from solvers.errors import HaloError

    args = _args(argv)
    try:
        sim_config_for(args.llm)  # a bad --llm fails here, before the task sets are generated
        by_family, n_tasks = run(args)
    except HaloError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"SIMULATED world ({args.llm}); {n_tasks} held-out tasks x {args.seeds} seeds")
    print(format_rows(by_family))
    if args.json:
        print(json.dumps(by_family))
    return 1 if dropped_pairs(by_family) else 0


def run(args: argparse.Namespace) -> tuple[dict[str, dict[str, dict[str, float]]], int]:
    """The figures per Table-2 family, and the number of held-out tasks."""
    from train.table2 import table2_family

    out = Path(args.out or tempfile.mkdtemp(prefix="calls-floor-"))
    held_out = held_out_split(args, out)
    seeds = [20_000 + k for k in range(args.seeds)]  # the pipeline's first evaluation seeds
    by_family = {}
    for fam in sorted({table2_family(t.family) for t in held_out}):
        by_family[fam] = family_figures([t for t in held_out if table2_family(t.family) == fam], seeds, args)
    return by_family, len(held_out)


if __name__ == "__main__":
    sys.exit(main())

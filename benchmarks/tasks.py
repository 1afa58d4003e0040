"""Task supply: generation speed, de-duplication, re-checked gold and calibrated levels.

For every generator and level it generates a set in this one process (one CPU for the
generator, plus the sandboxed planner/validator calls it makes), then checks the set again
from disk through the `gen:` loader, trusting nothing the generator wrote:

  1. tasks/s per CPU per domain, and the ratio of that rate to the bare planner's rate on the
     same problems (baseline, measured in this run: `solvers.plan` alone, no drafting, hashing,
     statement or validation) - how much verification and bookkeeping cost over solving;
     the median latency of one task (draft + solve + validate);
  2. de-duplication rate: draws dropped as isomorphic to an earlier task / all draws;
  3. re-check: every gold task solved again by the real planner and both plans (stored gold
     and fresh) validated by the real validator - target 100%;
  4. per domain and level: median plan length and planner CPU of the re-solve - targets:
     each strictly above the level below (easy < medium < hard < extreme).

    python benchmarks/tasks.py [--quick] [--count 30] [--domains a,b] [--set DIR] [--json]

--set DIR re-checks an existing set instead (target 3 and 4 only). The machine may be shared:
rates then read low; the ratio and the targets stay meaningful.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

import solvers  # noqa: E402
from rollout.tasks import load_tasks  # noqa: E402
from rollout.tasks.generators import LEVELS, REGISTRY  # noqa: E402
from rollout.tasks.generators.genset import read_index  # noqa: E402
from rollout.tasks.generators.pipeline import GenerateRequest, generate  # noqa: E402

LIMITS = solvers.Limits(timeout_s=30)


def tree_cpu_s() -> float:
    """CPU seconds of this process and all its children (the sandbox workers and their calls)."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            t = child.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def bench_generation(domains: list[str], count: int, out: Path) -> list[dict]:
    rows = []
    for domain in domains:
        wall0, cpu0 = time.perf_counter(), tree_cpu_s()
        stats = generate(GenerateRequest(jobs=tuple((domain, lv) for lv in LEVELS), count=count, seed=0, out=out,
                                         use_ray=False))
        wall, cpu = time.perf_counter() - wall0, tree_cpu_s() - cpu0
        gold = sum(s.gold for s in stats)
        drawn = sum(s.drawn for s in stats)
        rows.append({"domain": domain, "gold": gold, "drawn": drawn, "duplicates": sum(s.duplicates for s in stats),
                     "rejected": sum(sum(s.rejected.values()) for s in stats), "wall_s": wall, "cpu_s": cpu})
    return rows


def recheck(folder: Path, domains: list[str] | None) -> tuple[list[dict], dict]:
    """Solve and validate every task of the set again; return per-task measures and totals."""
    spec = f"gen:{folder}" + (f":domain={'+'.join(domains)}" if domains else "")
    index = {r["task_id"]: r for r in read_index(folder)}
    out, failures = [], []
    for task in load_tasks(spec):
        t0 = time.perf_counter()
        result = solvers.plan(task.gold_domain, task.gold_problem, planner=task.target_planner, limits=LIMITS)
        solve_s = time.perf_counter() - t0
        fresh_ok = result.ok and result.plan is not None and solvers.validate(
            task.gold_domain, task.gold_problem, solvers.plan_to_text(result.plan), limits=LIMITS).valid
        stored_ok = solvers.validate(task.gold_domain, task.gold_problem, task.gold_plan, limits=LIMITS).valid
        row = index[task.task_id]
        out.append({"domain": row["domain"], "level": row["level"], "ok": bool(fresh_ok and stored_ok),
                    "plan_length": len(result.plan or []), "planner_cpu_s": result.cpu_s, "solve_wall_s": solve_s})
        if not (fresh_ok and stored_ok):
            failures.append(task.task_id)
    return out, {"tasks": len(out), "ok": len(out) - len(failures), "failures": failures[:10]}


def monotone(checked: list[dict]) -> list[dict]:
    table = []
    for domain in sorted({r["domain"] for r in checked}):
        meds = []
        for lv in LEVELS:
            rs = [r for r in checked if r["domain"] == domain and r["level"] == lv]
            if rs:
                meds.append((lv, statistics.median(r["plan_length"] for r in rs),
                             statistics.median(r["planner_cpu_s"] for r in rs), len(rs)))
        lengths = [m[1] for m in meds]
        times = [m[2] for m in meds]
        full = len(meds) == len(LEVELS)
        table.append({"domain": domain, "levels": meds,
                      "length_ok": full and all(a < b for a, b in zip(lengths, lengths[1:], strict=False)),
                      "time_ok": full and all(a < b for a, b in zip(times, times[1:], strict=False))})
    return table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 tasks per domain and level (a few minutes)")
    ap.add_argument("--count", type=int, default=30, help="tasks per domain and level")
    ap.add_argument("--domains", default=",".join(REGISTRY))
    ap.add_argument("--set", dest="set_dir", help="re-check this existing set instead of generating one")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    count = 8 if args.quick else args.count
    domains = [d for d in args.domains.split(",") if d]
    report: dict = {"contended_note": f"load average {psutil.getloadavg()[0]:.1f} on {psutil.cpu_count()} CPUs"}
    passed = True
    with tempfile.TemporaryDirectory(prefix="halo-bench-tasks-") as tmp:
        folder = Path(args.set_dir) if args.set_dir else Path(tmp) / "set"
        if not args.set_dir:
            gen_rows = bench_generation(domains, count, folder)
            report["generation"] = gen_rows
        checked, totals = recheck(folder, None if args.set_dir else domains)
        report["recheck"] = totals
        report["calibration"] = monotone(checked)
    if not args.set_dir:
        print(f"generation, one process per domain ({count} gold tasks per level x {len(LEVELS)} levels); "
              f"{report['contended_note']}")
        print(f"{'domain':<12} {'gold':>5} {'tasks/s':>8} {'tasks/CPU-s':>11} {'planner-only/s':>14} "
              f"{'ratio':>6} {'latency ms':>10} {'de-dup':>7} {'rejected':>8}")
        for g in report["generation"]:
            solve = [r["solve_wall_s"] for r in checked if r["domain"] == g["domain"]]
            bare_rate = len(solve) / sum(solve) if solve else 0.0
            rate = g["gold"] / g["wall_s"]
            g.update(tasks_per_s=rate, tasks_per_cpu_s=g["gold"] / g["cpu_s"] if g["cpu_s"] else 0.0,
                     planner_only_per_s=bare_rate, ratio=rate / bare_rate if bare_rate else 0.0,
                     latency_ms=1000 * g["wall_s"] / max(1, g["drawn"] - g["duplicates"]),
                     dedup_rate=g["duplicates"] / g["drawn"])
            print(f"{g['domain']:<12} {g['gold']:>5} {rate:>8.1f} {g['tasks_per_cpu_s']:>11.1f} {bare_rate:>14.1f} "
                  f"{g['ratio']:>5.2f}x {g['latency_ms']:>10.0f} {100 * g['dedup_rate']:>6.1f}% {g['rejected']:>8}")
        total_dup = sum(g["duplicates"] for g in report["generation"]) / sum(g["drawn"] for g in report["generation"])
        print(f"de-duplication rate over all draws: {100 * total_dup:.1f}%")
    t = report["recheck"]
    share = t["ok"] / t["tasks"] if t["tasks"] else 0.0
    print(f"\nre-check: {t['ok']}/{t['tasks']} gold tasks solved again and validated ({100 * share:.1f}%)")
    print(f"{'PASS' if share == 1.0 else 'FAIL'}: 100% of gold tasks re-solved and validated"
          + (f" (failures: {t['failures']})" if t["failures"] else ""))
    passed &= share == 1.0
    print(f"\n{'domain':<12} " + " ".join(f"{lv:>16}" for lv in LEVELS) + "   (median plan length / planner CPU ms)")
    for row in report["calibration"]:
        cells = " ".join(f"{m[1]:>7g} / {1000 * m[2]:>6.0f}" for m in row["levels"])
        print(f"{row['domain']:<12} {cells}")
    for row in report["calibration"]:
        ok = row["length_ok"] and row["time_ok"]
        passed &= ok
        print(f"{'PASS' if ok else 'FAIL'}: {row['domain']} medians rise easy < medium < hard < extreme "
              f"(plan length {'ok' if row['length_ok'] else 'NOT monotone'}, "
              f"planner CPU {'ok' if row['time_ok'] else 'NOT monotone'})")
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())

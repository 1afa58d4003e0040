"""Before/after parity of a change: the CPU-bound rollout and the serve benchmarks of two trees,
run in the same session and interleaved, so machine drift weighs on both sides alike.

    python benchmarks/parity.py --base REV [--episodes 240] [--rounds 2] [--skip-serve]

The base tree is a temporary `git worktree` of REV; the head tree is this checkout. Each tree's
benchmark runs with PYTHONPATH pointing at that tree and the same virtual environment, in the order
base, head, head, base (one round = base, head; the second round is reversed). The rollout figures
are the simulated world at the default latency_scale (CPU-bound, not latency-bound); the serve figures
are `benchmarks/serve.py --quick --skip-llm` (the fast policy through direct ingress and through the
proxy). Each figure is printed as head/base; "same within noise" means within +-15%, the spread two
identical runs of these benchmarks show on this 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOISE = 0.15

ROLLOUT_PATTERNS = {
    "rollout 1 worker, episodes/s": (r"1 worker ([\d.]+) episodes/s", "higher"),
    "rollout 2 workers, episodes/s": (r"2 workers ([\d.]+) episodes/s", "higher"),
    "rollout overhead vs solver-bound": (r"solver CPU [^)]*\) -> ([\d.]+)x", "lower"),
    "rollout peak RSS per worker, MB": (r"peak RSS per worker actor: ([\d.]+) MB", "lower"),
}
# the chosen URL's row ("fast ingress" before issue 30, "the one URL" after): p50, p99, req/s
CHOSEN_ROW = r"fast policy, (?:fast ingress|the one URL) \(chosen\)"
SERVE_PATTERNS = {
    "serve fast chosen p50, ms": (CHOSEN_ROW + r"\s+([\d.]+)", "lower"),
    "serve fast chosen req/s": (CHOSEN_ROW + r"\s+[\d.]+\s+[\d.]+\s+([\d.]+)", "higher"),
    "serve fast proxy p50, ms": (r"fast policy via proxy\s+([\d.]+)", "lower"),
    "serve floor p50, ms": (r"floor: uvicorn \+ FastAPI no-op\s+([\d.]+)", "lower"),
}


def run_bench(tree: Path, argv: list[str], label: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    print(f"  running {label}: {' '.join(argv)}", flush=True)
    proc = subprocess.run([sys.executable, *argv], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0 and "missed:" not in proc.stdout:
        # exit 1 with a "missed:" line is a benchmark that ran and missed one of its own targets
        tail = (proc.stdout + proc.stderr)[-1500:]
        raise SystemExit(f"benchmark failed in {tree} (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def parse(text: str, patterns: dict[str, tuple[str, str]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, (pattern, _) in patterns.items():
        m = re.search(pattern, text)
        if m:
            out[name] = float(m.group(1))
    return out


def verdicts(results: dict[str, dict[str, list[float]]], skip_serve: bool) -> tuple[list[str], dict]:
    """Print one line per figure; (the figures that are worse than noise or not measured, the figures).
    A figure that was not measured fails: parity cannot be claimed on it."""
    print(f"\n{'figure':<36} {'base':>10} {'head':>10} {'head/base':>10}  verdict")
    failed, figures = [], {}
    patterns = ROLLOUT_PATTERNS if skip_serve else {**ROLLOUT_PATTERNS, **SERVE_PATTERNS}
    for name, (_, better) in patterns.items():
        b, h = results["base"].get(name), results["head"].get(name)
        if not b or not h:
            print(f"{name:<36} {'-':>10} {'-':>10} {'-':>10}  not measured")
            failed.append(f"{name} (not measured)")
            continue
        bm, hm = statistics.mean(b), statistics.mean(h)
        ratio = hm / bm
        worse = ratio < 1 - NOISE if better == "higher" else ratio > 1 + NOISE
        verdict = "worse than noise" if worse else "same within noise" if abs(ratio - 1) <= NOISE else "better"
        if worse and "floor" not in name:
            failed.append(name)
        figures[name] = {"base": bm, "head": hm, "ratio": ratio, "verdict": verdict}
        print(f"{name:<36} {bm:>10.2f} {hm:>10.2f} {ratio:>9.2f}x  {verdict}")
    return failed, figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="git revision of the 'before' tree")
    parser.add_argument("--episodes", type=int, default=240, help="episodes per rollout job")
    parser.add_argument("--rounds", type=int, choices=(1, 2), default=2)
    parser.add_argument("--skip-serve", action="store_true")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="halo-parity-"))
    base_tree = work / "base"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(base_tree), args.base], cwd=ROOT, check=True)
    trees = {"base": base_tree, "head": ROOT}
    order = ["base", "head", "head", "base"][: 2 * args.rounds]
    results: dict[str, dict[str, list[float]]] = {"base": {}, "head": {}}
    rollout_argv = ["benchmarks/rollout.py", "--repeats", "1", "--episodes", str(args.episodes),
                    "--store-rows", "20000"]
    serve_argv = ["benchmarks/serve.py", "--quick", "--skip-llm"]
    try:
        print(f"# parity: base {args.base} vs head {ROOT} (simulated world, default latency_scale: CPU-bound)")
        for side in order:
            text = run_bench(trees[side], rollout_argv, f"{side} rollout")
            for k, v in parse(text, ROLLOUT_PATTERNS).items():
                results[side].setdefault(k, []).append(v)
        if not args.skip_serve:
            for side in order[:2]:
                text = run_bench(trees[side], serve_argv, f"{side} serve")
                for k, v in parse(text, SERVE_PATTERNS).items():
                    results[side].setdefault(k, []).append(v)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False)
        shutil.rmtree(work, ignore_errors=True)

    failed, figures = verdicts(results, args.skip_serve)
    print("\nparity held" if not failed else "\nparity MISSED: " + "; ".join(failed))
    if args.json:
        print(json.dumps({"figures": figures, "missed": failed, "passed": not failed}))
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())

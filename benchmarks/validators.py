"""Validator agreement: VAL run directly vs the product with VAL vs the product with Kairos.

Builds (domain, problem, plan) triples from the bundled tasks, ../shared/benchmarks (IPC,
IPC temporal, PlanBench) and generated tasks (every generator, classical and temporal): a valid
plan from Fast Downward (classical) or from POPF and Kairos (temporal), and seeded corruptions of
it (drop a step, swap two, swap a step's arguments, rename its action, add a step, and for
temporal plans a wrong duration). Each triple is judged by VAL's `Validate -t 0.001` run
directly (the reference), by `solvers.validate(..., validator="val")` and by
`solvers.validate(..., validator="kairos")`. Prints `agreement: X%` per product judge (verdicts:
valid or not), the detail agreement of the two products per reason (failing step, unsatisfied
condition, unmet goal), and every disagreement. Exits 1 when a verdict agreement is under 100%
or cannot be computed (VAL or POPF missing: put ../shared/planners/bin first on PATH).

    PATH=../shared/planners/bin:$PATH .venv/bin/python benchmarks/validators.py [--quick]

Plans are cached in .cache/validators-plans.json (the planners are the slow part).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import solvers  # noqa: E402
from solvers import external, locate  # noqa: E402
from solvers.plans import parse_plan  # noqa: E402
from solvers.results import PlanStep, plan_to_text  # noqa: E402

SHARED = ROOT.parent / "shared" / "benchmarks"
CACHE = ROOT / ".cache" / "validators-plans.json"
PLAN_LIMIT_S = 20.0
CORRUPTIONS = ("drop", "swap", "swap_args", "rename", "add", "duration")


@dataclass(frozen=True)
class Pair:
    source: str  # where the task comes from, e.g. "shared/ipc/blocksworld/probBLOCKS-4-1"
    domain: str
    problem: str
    temporal: bool


@dataclass
class Triple:
    pair: Pair
    planner: str
    corruption: str  # "none" for the planner's own plan
    plan: str
    verdicts: dict[str, solvers.ValidationResult | bool] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.pair.source} [{self.planner}/{self.corruption}]"


# ---------------------------------------------------------------- tasks


def _is_temporal(domain: str) -> bool:
    return ":durative-action" in domain.lower()


def _shared_pairs(per_domain: int) -> list[Pair]:
    pairs: list[Pair] = []
    for family in ("ipc", "ipc-temporal"):
        for folder in sorted((SHARED / family).glob("*")) if (SHARED / family).is_dir() else []:
            domain_file = folder / "domain.pddl"
            if not domain_file.exists():
                continue  # per-problem domain files (childsnack): not sampled
            domain = domain_file.read_text()
            problems = sorted((p for p in folder.glob("*.pddl") if p.name != "domain.pddl"),
                              key=lambda p: (len(p.name), p.name))
            for problem in problems[:per_domain]:
                pairs.append(Pair(f"shared/{family}/{folder.name}/{problem.stem}", domain, problem.read_text(),
                                  _is_temporal(domain)))
    for folder in sorted((SHARED / "planbench").glob("*")) if (SHARED / "planbench").is_dir() else []:
        if not (folder / "domain.pddl").exists():
            continue
        domain = (folder / "domain.pddl").read_text()
        instances = sorted((folder / "instances").glob("*.pddl"), key=lambda p: (len(p.name), p.name))
        for problem in instances[:per_domain]:
            pairs.append(Pair(f"shared/planbench/{folder.name}/{problem.stem}", domain, problem.read_text(), False))
    return pairs


def _bundled_pairs(limit: int) -> list[Pair]:
    from rollout.tasks import load_tasks

    pairs = [Pair(f"bundled/{t.task_id}", t.gold_domain, t.gold_problem, t.target_planner == "temporal")
             for t in load_tasks("bundled") if t.gold_domain and t.gold_problem]
    temporal = [p for p in pairs if p.temporal]
    return temporal + [p for p in pairs if not p.temporal][:limit]


def _generated_pairs(per_classical: int, per_temporal: int) -> list[Pair]:
    from rollout.tasks.generators import REGISTRY, get_generator
    from rollout.tasks.generators.draft import draft

    pairs = []
    for name in REGISTRY:
        gen = get_generator(name)
        temporal = gen.target_planner == "temporal"
        for index in range(per_temporal if temporal else per_classical):
            level = ("easy", "medium")[index % 2]
            candidate = draft(name, level, seed=28, index=index, overrides={})
            pairs.append(Pair(f"generated/{name}/{level}-{index}", gen.domain_text(), candidate.problem, temporal))
    return pairs


def task_pairs(quick: bool) -> list[Pair]:
    if quick:
        pairs = _shared_pairs(1) + _bundled_pairs(6) + _generated_pairs(1, 2)
    else:
        pairs = _shared_pairs(8) + _bundled_pairs(120) + _generated_pairs(6, 12)
    unique: dict[tuple[str, str], Pair] = {}
    for pair in pairs:
        unique.setdefault((pair.domain, pair.problem), pair)
    return list(unique.values())


# ---------------------------------------------------------------- plans


def _key(planner: str, pair: Pair) -> str:
    return hashlib.sha256(f"{planner}\0{pair.domain}\0{pair.problem}".encode()).hexdigest()


def valid_plans(pairs: list[Pair], cache: dict[str, str | None]) -> list[tuple[Pair, str, str]]:
    """(pair, planner, plan) for every pair a planner solved in the limit (cached by texts)."""
    found = []
    limits = solvers.Limits(timeout_s=PLAN_LIMIT_S)
    for number, pair in enumerate(pairs, 1):
        for planner in (("popf", "kairos") if pair.temporal else ("fd",)):
            key = _key(planner, pair)
            if key not in cache:
                result = solvers.plan(pair.domain, pair.problem, planner=planner, limits=limits)
                cache[key] = result.plan_text if result.ok and result.plan else None
            if cache[key]:
                found.append((pair, planner, cache[key]))
        if number % 50 == 0:
            print(f"  planned {number}/{len(pairs)} tasks", flush=True)
    return found


# ---------------------------------------------------------------- corruptions


def _text(steps: list[PlanStep]) -> str:
    return plan_to_text(steps)


def corrupt(plan: str, kind: str, rng: random.Random, temporal: bool) -> str | None:
    """The plan with one seeded corruption, None when this plan cannot take it."""
    steps = parse_plan(plan)
    if not steps:
        return None
    i = rng.randrange(len(steps))
    if kind == "drop":
        return _text(steps[:i] + steps[i + 1:])
    if kind == "swap":
        if len(steps) < 2:
            return None
        j = min(i + 1, len(steps) - 1) if i + 1 < len(steps) else i - 1
        a, b = steps[i], steps[j]
        if temporal:  # order is time: exchange start times
            steps[i], steps[j] = PlanStep(a.name, a.args, b.start, a.duration), PlanStep(b.name, b.args, a.start,
                                                                                         b.duration)
        else:
            steps[i], steps[j] = b, a
        return _text(steps)
    if kind == "swap_args":
        with_args = [k for k, s in enumerate(steps) if len(set(s.args)) >= 2]
        if not with_args:
            return None
        k = rng.choice(with_args)
        s = steps[k]
        steps[k] = PlanStep(s.name, tuple(reversed(s.args)), s.start, s.duration)
        return _text(steps)
    if kind == "rename":
        s = steps[i]
        steps[i] = PlanStep(s.name + "-renamed", s.args, s.start, s.duration)
        return _text(steps)
    if kind == "add":
        extra = steps[rng.randrange(len(steps))]
        if temporal:
            last = max((s.start or 0.0) + (s.duration or 0.0) for s in steps)
            extra = PlanStep(extra.name, extra.args, round(last + 0.01, 3), extra.duration)
            return _text(steps + [extra])
        return _text(steps[:i] + [extra] + steps[i:])
    if kind == "duration" and temporal:
        s = steps[i]
        steps[i] = PlanStep(s.name, s.args, s.start, round((s.duration or 1.0) * 1.5 + 0.5, 3))
        return _text(steps)
    return None


def triples(plans: list[tuple[Pair, str, str]], seed: int) -> list[Triple]:
    out = []
    for pair, planner, plan in plans:
        rng = random.Random(f"{seed}|{pair.source}|{planner}")
        out.append(Triple(pair, planner, "none", plan))
        for kind in CORRUPTIONS:
            text = corrupt(plan, kind, rng, pair.temporal)
            if text is not None and text != plan:
                out.append(Triple(pair, planner, kind, text))
    return out


# ---------------------------------------------------------------- judges


def val_directly(triple: Triple, binary: str) -> bool:
    """VAL's own verdict, run as its README says (no sandbox, no product code)."""
    with tempfile.TemporaryDirectory(prefix="halo-val-") as tmp:
        folder = Path(tmp)
        for name, text in (("domain.pddl", triple.pair.domain), ("problem.pddl", triple.pair.problem),
                           ("plan.txt", triple.plan)):
            (folder / name).write_text(text)
        tolerance = f"{external.val_tolerance():g}"
        proc = subprocess.run([binary, "-t", tolerance, "domain.pddl", "problem.pddl", "plan.txt"], cwd=folder,
                              capture_output=True, text=True, timeout=120)
    return proc.returncode == 0 and any(line.strip() == "Plan valid" for line in proc.stdout.splitlines())


def judge(all_triples: list[Triple], binary: str) -> None:
    limits = solvers.Limits(timeout_s=60)
    for number, triple in enumerate(all_triples, 1):
        pair = triple.pair
        triple.verdicts["val-direct"] = val_directly(triple, binary)
        for validator in ("val", "kairos"):
            triple.verdicts[f"product+{validator}"] = solvers.validate(pair.domain, pair.problem, triple.plan,
                                                                       limits=limits, validator=validator)
        if number % 250 == 0:
            print(f"  judged {number}/{len(all_triples)} triples", flush=True)


# ---------------------------------------------------------------- report


def _valid(verdict: solvers.ValidationResult | bool) -> bool:
    return verdict if isinstance(verdict, bool) else verdict.valid


def _lower_bound(agree: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson lower bound of an agreement rate (exact for agree == n)."""
    if n == 0:
        return 0.0
    if agree == n:
        return 0.05 ** (1 / n)
    if agree == 0:
        return 0.0

    def tail(p: float) -> float:  # P(X >= agree) for X ~ Binomial(n, p)
        logs = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p)
                + (n - k) * math.log1p(-p) for k in range(agree, n + 1)]
        return sum(math.exp(v) for v in logs)

    low, high = 0.0, agree / n
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if tail(mid) < 0.05 else (low, mid)
    return low


def verdict_agreement(all_triples: list[Triple], judge_name: str) -> tuple[int, list[Triple]]:
    wrong = [t for t in all_triples if _valid(t.verdicts[judge_name]) != t.verdicts["val-direct"]]
    return len(all_triples) - len(wrong), wrong


def _detail(t: Triple, field_name: str) -> tuple[object, object]:
    a, b = t.verdicts["product+val"], t.verdicts["product+kairos"]
    return getattr(a, field_name), getattr(b, field_name)


def detail_agreement(all_triples: list[Triple]) -> dict[str, tuple[int, int, list[str]]]:
    """Per reason, over the triples both products call plan_invalid: (agree, compared, disagreements)."""
    both_invalid = [t for t in all_triples
                    if t.verdicts["product+val"].category.value == "plan_invalid"
                    and t.verdicts["product+kairos"].category.value == "plan_invalid"]
    reasons = {
        "step": ("failing_step", [t for t in both_invalid if any(_detail(t, "failing_step"))]),
        "precondition": ("unsatisfied", [t for t in both_invalid if all(v is not None
                                                                        for v in _detail(t, "failing_step"))]),
        "goal": ("unreached_goal", [t for t in both_invalid if any(_detail(t, "unreached_goal"))]),
    }
    out = {}
    for reason, (field_name, compared) in reasons.items():
        wrong = [f"{t.name}: val={_detail(t, field_name)[0]!r} kairos={_detail(t, field_name)[1]!r}"
                 for t in compared if _detail(t, field_name)[0] != _detail(t, field_name)[1]]
        out[reason] = (len(compared) - len(wrong), len(compared), wrong)
    return out


def _describe(verdict: solvers.ValidationResult | bool) -> str:
    if isinstance(verdict, bool):
        return "valid" if verdict else "invalid"
    return f"{verdict.category.value} {verdict.message[:160]!r}"


def report(all_triples: list[Triple], seconds: float) -> bool:
    kinds = Counter("temporal" if t.pair.temporal else "classical" for t in all_triples)
    sources = Counter(t.pair.source.split("/")[0] for t in all_triples)
    planners = Counter(t.planner for t in all_triples if t.corruption == "none")
    valid = sum(1 for t in all_triples if t.verdicts["val-direct"])
    print(f"triples: {len(all_triples)} ({kinds['classical']} classical, {kinds['temporal']} temporal); "
          f"sources {dict(sources)}; valid plans by planner {dict(planners)}; VAL says valid: {valid}; "
          f"corruptions {dict(Counter(t.corruption for t in all_triples))}; {seconds:.0f} s")
    ok = True
    for judge_name in ("product+val", "product+kairos"):
        agree, wrong = verdict_agreement(all_triples, judge_name)
        n = len(all_triples)
        print(f"agreement: {100 * agree / n:.2f}% ({agree}/{n}) {judge_name} vs VAL directly "
              f"(95% lower bound {100 * _lower_bound(agree, n):.2f}%; target 100%)")
        for t in wrong:
            print(f"  DISAGREE {judge_name}: {t.name}: VAL directly {_describe(t.verdicts['val-direct'])}, "
                  f"{judge_name} {_describe(t.verdicts[judge_name])}")
        ok = ok and agree == n and n > 0
    for reason, (agree, compared, wrong) in detail_agreement(all_triples).items():
        share = f"{100 * agree / compared:.2f}%" if compared else "n/a"
        print(f"detail agreement ({reason}): {share} ({agree}/{compared}) product+val vs product+kairos")
        for line in wrong:
            print(f"  DETAIL {reason}: {line}")
    return ok


# ---------------------------------------------------------------- main


def _load_cache() -> dict[str, str | None]:
    try:
        return json.loads(CACHE.read_text())
    except (OSError, ValueError):
        return {}


def _save_cache(cache: dict[str, str | None]) -> None:
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    tmp = CACHE.with_suffix(".tmp")
    tmp.write_text(json.dumps(cache))
    tmp.replace(CACHE)


def _tools_missing() -> str:
    from solvers.planners import PLANNERS

    missing = [name for name in ("val", "popf") if not PLANNERS.get(name).available()]
    return ", ".join(missing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small sample (about 150 triples)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corruptions")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    missing = _tools_missing()
    if missing:
        print(f"error: {missing} not found on PATH; the agreement cannot be computed "
              "(PATH=../shared/planners/bin:$PATH, apt-get install -y coinor-libcbc3)", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    pairs = task_pairs(args.quick)
    print(f"tasks: {len(pairs)} ({sum(p.temporal for p in pairs)} temporal)", flush=True)
    cache = _load_cache()
    try:
        plans = valid_plans(pairs, cache)
    finally:
        _save_cache(cache)
    all_triples = triples(plans, args.seed)
    judge(all_triples, str(locate.val_binary()))
    ok = report(all_triples, time.monotonic() - t0)
    if args.json:
        args.json.write_text(json.dumps(_figures(all_triples), indent=2))
    solvers.shutdown()
    if len(all_triples) < (100 if args.quick else 2000):
        print(f"target failed: {len(all_triples)} triples, fewer than the {2000 if not args.quick else 100} wanted")
        ok = False
    print("targets met" if ok else "TARGETS FAILED")
    return 0 if ok else 1


def _figures(all_triples: list[Triple]) -> dict:
    out: dict = {"triples": len(all_triples)}
    for judge_name in ("product+val", "product+kairos"):
        out[judge_name] = verdict_agreement(all_triples, judge_name)[0]
    out["detail"] = {reason: [agree, compared] for reason, (agree, compared, _) in
                     detail_agreement(all_triples).items()}
    return out


if __name__ == "__main__":
    sys.exit(main())

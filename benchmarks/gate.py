"""The promotion gate's error rates, measured: 40 seeded gates for each of three candidates of known quality.

A served model (the fast policy trained on the simulated prompted teacher's episodes) serves with
decision noise (`--serving WASTE,RESTART`: each decision becomes NoOp with probability WASTE, else
agent 2's rewrite from scratch with probability RESTART; DecisionNoise says why these two). The
candidates are made from it:

- equal:  the same model and the same noise, another noise seed (same quality, other decisions);
- worse:  the same model wasting more steps (`--worse`, about 5 points of oracle success lost);
- better: the same model wasting none and restarting a stuck episode now and then (`--better`,
  about 8 points better).

Every policy runs once on a shared pool of held-out episodes (tasks x seeds, the same simulated
world): a gate draws its pairs from that pool in a seeded random order, batch by batch, and runs
cluster/loop/gate.py's sequential test on them. The pool's own paired difference of each candidate
against the serving model is printed: it is the candidate's true quality in this benchmark. Targets:
false promotion (equal) <= 5%, worse promoted <= 5%, power (better) >= 80% of the gates (each count
printed with its Clopper-Pearson 95% interval: 40 gates cannot bound a 5% rate tightly; the test's
own error bound is by construction, cluster/loop/sequential.py), and each candidate's pool
difference has the sign it is said to have, by its one-sided 95% bound. SIMULATED (llm_backend=sim).

    python benchmarks/gate.py                      # the full run (about 15-20 minutes on 2 CPUs)
    python benchmarks/gate.py --quick              # a smoke run (a few minutes; targets not meaningful)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rollout.core.decision import Decision, Policy  # noqa: E402
from rollout.core.state import EpisodeState  # noqa: E402


class DecisionNoise(Policy):
    """A served model with decision noise. With probability `waste` a decision becomes NoOp (11: the
    step is spent, nothing changes), else with probability `restart` agent 2 (rewrite the domain and
    problem from scratch). Decisions of the rules layer are subject to it too.

    Uniformly random agents are not noise that costs anything in this world: the loop recovers from
    an idle call at the next step, and a random step even unsticks a model that repeats itself
    (measured on a served model: 10% random agents +5 points; 10% restarts +7; 40% NoOps -3)."""

    def __init__(self, inner: Policy, seed: int, *, waste: float = 0.0, restart: float = 0.0) -> None:
        self.inner, self.seed, self.waste, self.restart = inner, seed, waste, restart
        self.name, self.version = f"{inner.name}+noise(waste {waste:g}, restart {restart:g})", inner.version
        self.decides_inline = inner.decides_inline

    def _decide(self, state: EpisodeState) -> Decision:
        from rollout.core.agent_table import AgentId
        from rollout.policies.random import state_rng

        decision = self.inner.decide(state)
        u = state_rng(self.seed, state, "decision-noise").random()
        agent = AgentId.NOOP if u < self.waste else AgentId.EMERGENCY if u < self.waste + self.restart else None
        if agent is None:
            return decision
        return dataclasses.replace(decision, agent_id=agent, decided_by="model", reason="decision noise")

    def close(self) -> None:
        self.inner.close()


def train_served_model(out: Path, tasks: list, seeds: int, log) -> Path:  # noqa: ANN001
    """The fast policy from the simulated prompted teacher's episodes, built as the pipeline's main
    policy is (validator filter, idle steps dropped, one verified augmentation)."""
    from rollout.loop.episode import EpisodeConfig, run_episodes
    from rollout.policies import make_policy
    from train.dataset import BuildConfig, build_examples, write_dataset
    from train.fast_policy import train_fast_policy_dir

    policy = make_policy("rules+teacher:model=sim", seed=0)
    records = []
    for s in range(seeds):
        records += asyncio.run(run_episodes(tasks, policy, EpisodeConfig(seed=10_000 + s, run_id="gate-teacher"),
                                            concurrency=16))
    policy.close()
    log(f"  teacher: {len(records)} episodes, {sum(r.success_validator for r in records)} validator-accepted")
    build = BuildConfig(check="validator", augment_copies=1, verify_augment=True, drop_idle=True)
    examples, stages = build_examples(records, build)
    write_dataset(examples, stages, out / "data", config=build, sources=["gate-teacher"])
    train_fast_policy_dir(out / "data", out / "model", name="served")
    return out / "model"


def cached_pool(cache: Path | None, model_dir: Path, noise: tuple[float, float], noise_seed: int, tasks: list,
                seeds: list[int]) -> dict:
    """run_pool, its episodes kept in `cache` under a key of everything they depend on (the model's
    weights, the noise, its seed, the tasks and seeds), so a rerun with other candidates reuses them."""
    import hashlib
    import pickle

    if cache is None:
        return run_pool(model_dir, noise, noise_seed, tasks, seeds)
    weights = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(model_dir.iterdir()) if p.is_file()))
    key = hashlib.sha256(repr((weights.hexdigest(), noise, noise_seed, seeds, [t.task_id for t in tasks]))
                         .encode()).hexdigest()[:16]
    path = cache / f"pool-{key}.pkl"
    if path.is_file():
        return pickle.loads(path.read_bytes())
    pool = run_pool(model_dir, noise, noise_seed, tasks, seeds)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(pool))
    return pool


def run_pool(model_dir: Path, noise: tuple[float, float], noise_seed: int, tasks: list, seeds: list[int]) -> dict:
    """(task, seed) -> episode of the served model with this noise, on every pool episode."""
    from rollout.loop.episode import EpisodeConfig, run_episodes
    from rollout.policies.rules import RulesFirst
    from train.policies import load_policy

    # the noise is on every decision, the rules layer's too: the served policy as a whole samples
    waste, restart = noise
    policy = DecisionNoise(RulesFirst(load_policy(model_dir, rules_first=False)), noise_seed, waste=waste,
                           restart=restart)
    records = []
    try:
        for seed in seeds:
            records += asyncio.run(run_episodes(tasks, policy, EpisodeConfig(seed=seed, run_id="gate-pool"),
                                                concurrency=16))
    finally:
        policy.close()
    return {(r.task_id, r.seed): r for r in records}


def pool_difference(cand: dict, serv: dict) -> dict[str, float]:
    keys = sorted(cand)
    diffs = [float(bool(cand[k].success_oracle)) - float(bool(serv[k].success_oracle)) for k in keys]
    n = len(diffs)
    mean = sum(diffs) / n
    se = (sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) ** 0.5
    return {"pairs": n, "episodes": n, "difference": 100 * mean, "se": 100 * se,
            "discordant_share": sum(d != 0 for d in diffs) / n,
            "calls_difference": sum(cand[k].total_llm_calls - serv[k].total_llm_calls for k in keys) / n}


def run_gates(cand: dict, serv: dict, n_gates: int, gate_cfg, batch: int, salt: str) -> list:  # noqa: ANN001
    from cluster.loop.gate import run_sequential_gate

    keys = sorted(cand)
    out = []
    for g in range(n_gates):
        order = list(keys)
        random.Random(f"{salt}|{g}").shuffle(order)

        def next_batch(k: int, order: list = order) -> list:
            return [(cand[key], serv[key]) for key in order[k * batch:(k + 1) * batch]]

        result, seen = run_sequential_gate(next_batch, gate_cfg)
        out.append((result.promote, len(seen), result.reasons[0], result.sequential))
    return out


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    from train.targets import binomial_interval

    return binomial_interval(k, n)


def targets(figures: dict) -> list:
    """The issue's figures as it states them (X of 40 gates); the pool checks that each candidate has
    the quality it is said to have, by the paired difference's one-sided 95% bound."""
    from train.targets import AtLeast, AtMost, DifferenceBound

    return [AtMost("false promotion (equal candidate) <= 5%", "equal", "promoted_share", 0.05),
            AtMost("worse promoted <= 5%", "worse", "promoted_share", 0.05),
            AtLeast("power (better candidate) >= 80%", "better", "promoted_share", 0.80),
            DifferenceBound("the worse candidate is worse in the pool (upper 95% bound <= -2 points)", "worse",
                            -2.0, direction="below"),
            DifferenceBound("the better candidate is better in the pool (lower 95% bound >= +5 points)", "better",
                            5.0)]


def summarize(label: str, gates: list, pool: dict) -> dict:
    k, n = sum(p for p, *_ in gates), len(gates)
    low, high = clopper_pearson(k, n)
    return {**pool, "gates": n, "promoted": k, "promoted_share": k / n, "promoted_low": low, "promoted_high": high,
            "mean_pairs_per_gate": sum(s for _, s, *_ in gates) / n,
            "mean_episodes_per_gate": 2 * sum(s for _, s, *_ in gates) / n,
            "stopped_by": dict(Counter(_why(r) for *_, r, _ in gates))}


def _why(reason: str) -> str:
    """A gate's reason without its figures: better / cheaper ... / not better ... / undecided."""
    return reason.split(" (")[0].split(":")[0].split(" after ")[0]


def print_results(figures: dict, policies: dict) -> None:
    print("\nSIMULATED (llm_backend=sim): candidates of known quality against the served model\n")
    print("| candidate | noise (waste, restart) | pool paired difference (points) | discordant pairs | promoted | "
          "Clopper-Pearson 95% | mean paired episodes per gate (both sides) | stopped by |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for label in ("equal", "worse", "better"):
        f = figures[label]
        print(f"| {label} | {policies[label][0]} | {f['difference']:+.1f} ± {f['se']:.1f} "
              f"({f['pairs']}) | {100 * f['discordant_share']:.0f}% | {f['promoted']}/{f['gates']} | "
              f"[{100 * f['promoted_low']:.0f}%, {100 * f['promoted_high']:.0f}%] | "
              f"{f['mean_pairs_per_gate']:.0f} ({f['mean_episodes_per_gate']:.0f}) | {f['stopped_by']} |")
    print(f"\nfalse promotion: {figures['equal']['promoted']}/{figures['equal']['gates']}")
    print(f"worse promoted: {figures['worse']['promoted']}/{figures['worse']['gates']}")
    print(f"power: {figures['better']['promoted']}/{figures['better']['gates']}")
    mean_eps = sum(f["mean_episodes_per_gate"] for f in figures.values()) / 3
    print(f"mean episodes per gate (both sides, all candidates): {mean_eps:.0f}")


def _noise(text: str) -> tuple[float, float]:
    try:
        waste, restart = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"want WASTE,RESTART (two probabilities), got {text!r}") from None
    if waste < 0 or restart < 0 or waste + restart > 1:
        raise argparse.ArgumentTypeError(f"WASTE and RESTART must be >= 0 with a sum <= 1, got {text!r}")
    return waste, restart


def main(argv: list[str] | None = None) -> int:  # noqa: C901  (the stages, in order)
    from cluster.loop.config import GateConfig
    from rollout.tasks.loaders import load_tasks
    from train.pipeline import split_tasks
    from train.targets import judge, print_verdicts

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="planbench:all:25,ipc:bundled")
    ap.add_argument("--teacher-seeds", type=int, default=3, help="teacher episodes per training task")
    ap.add_argument("--pool-seeds", type=int, default=16, help="seeds per held-out task in the shared pool")
    ap.add_argument("--gates", type=int, default=40, help="seeded gates per candidate")
    ap.add_argument("--batch", type=int, default=20, help="pairs per look")
    ap.add_argument("--serving", type=_noise, default=(0.4, 0.0), help="serving noise WASTE,RESTART (0.4,0)")
    ap.add_argument("--worse", type=_noise, default=(0.5, 0.0), help="the worse candidate's noise (0.5,0)")
    ap.add_argument("--better", type=_noise, default=(0.0, 0.1), help="the better candidate's noise (0,0.1)")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--min-effect", type=float, default=0.05)
    ap.add_argument("--max-episodes", type=int, default=600, help="paired episodes per gate, at most")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 4 pool seeds, 8 gates")
    ap.add_argument("--out", default="", help="where the served model goes (default: a temporary directory)")
    ap.add_argument("--model", default="", help="use this served model (a fast-policy directory) instead of training")
    ap.add_argument("--cache", default="", help="keep the pools' episodes here and reuse them on a rerun")
    ap.add_argument("--json", action="store_true", help="also print the figures and verdicts as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.pool_seeds, args.gates, args.teacher_seeds = 4, 8, 1
    t0 = time.perf_counter()
    out = Path(args.out or tempfile.mkdtemp(prefix="halo-gate-"))
    tasks = [t for t in load_tasks(args.tasks) if t.gold_domain and t.gold_problem]
    train_tasks, held = split_tasks(tasks, 0.3)
    if args.model:
        model = Path(args.model)
        print(f"[1/3] served model: {model} (given)", flush=True)
    else:
        print(f"[1/3] served model: teacher episodes on {len(train_tasks)} tasks x {args.teacher_seeds} seeds",
              flush=True)
        model = train_served_model(out / "served", train_tasks, args.teacher_seeds, print)
    seeds = [30_000 + s for s in range(args.pool_seeds)]
    print(f"[2/3] pools: {len(held)} held-out tasks x {len(seeds)} seeds per policy", flush=True)
    policies = {"serving": (args.serving, 1), "equal": (args.serving, 2), "worse": (args.worse, 3),
                "better": (args.better, 4)}
    pools = {}
    for label, (noise, noise_seed) in policies.items():
        t1 = time.perf_counter()
        pools[label] = cached_pool(Path(args.cache) if args.cache else None, model, noise, noise_seed, held, seeds)
        ok = sum(bool(r.success_oracle) for r in pools[label].values()) / len(pools[label])
        print(f"  {label} (waste {noise[0]:g}, restart {noise[1]:g}, noise seed {noise_seed}): {len(pools[label])} "
              f"episodes, oracle {100 * ok:.1f}%, in {time.perf_counter() - t1:.0f} s", flush=True)
    gate_cfg = GateConfig(alpha=args.alpha, min_effect=args.min_effect, max_episodes=args.max_episodes)
    print(f"[3/3] {args.gates} gates per candidate (alpha {gate_cfg.alpha}, min_effect {gate_cfg.min_effect}, "
          f"beta {gate_cfg.beta}, margin {gate_cfg.noninferiority_margin}, budget {gate_cfg.max_episodes} pairs, "
          f"{args.batch} pairs per look)", flush=True)
    figures = {}
    for label in ("equal", "worse", "better"):
        gates = run_gates(pools[label], pools["serving"], args.gates, gate_cfg, args.batch, label)
        figures[label] = summarize(label, gates, pool_difference(pools[label], pools["serving"]))
    print_results(figures, policies)
    print(f"wall time {time.perf_counter() - t0:.0f} s")
    figures["settings"] = {k: v for k, v in vars(args).items() if k != "json"}
    if args.quick:
        print("(--quick: too few pool episodes and gates for the targets to mean anything)")
    return print_verdicts(judge(targets(figures), figures), figures=figures, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())

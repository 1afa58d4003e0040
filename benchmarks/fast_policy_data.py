"""How the fast policy's training data decide whether it falls below its prompted teacher, in
drawn simulated worlds (issue 27): one teacher data set per world, several dataset settings.

Per world of `draw_worlds(N, SEED)`: the simulated teacher behind the rules layer
(`rules+teacher:model=sim`) runs on the training tasks, the prompted teacher
(`teacher:model=sim`) on the held-out tasks; then for each dataset variant a fast policy is
trained and run on the same held-out tasks and seeds, and compared with the prompted teacher
(paired oracle-success difference with its standard error, LLM calls ratio). Everything is
simulated (llm_backend=sim).

    python benchmarks/fast_policy_data.py --worlds 3 --world-seed 100 --variants base,hindsight
    python benchmarks/fast_policy_data.py --worlds 2 --world-seed 100 --variants nextrank,dagger --dagger-rounds 2
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# name -> BuildConfig settings beside the pipeline's defaults (validator filter, drop_idle, 1 copy);
# "next_ranked": True trains the policy with its move-on weight measured on the teacher data
# (HashedLinearPolicy.next_ranked, train/fast_policy.retry_discount_from)
VARIANTS: dict[str, dict] = {
    "base": {},
    "nextrank": {"next_ranked": True},
    "nextrank-model": {"next_ranked": True, "retry_prior": "model"},
    # "dagger": the nextrank policy, then --dagger-rounds rounds of teacher labels on its own states
    # (train/dagger.py), all labels ("none") or those whose agent moved the verdict ("progress")
    "dagger": {"next_ranked": True, "dagger": "none"},
    "dagger-progress": {"next_ranked": True, "dagger": "progress"},
    "hindsight": {"hindsight": True},
    "progress": {"progress_only": True},
    "cheap": {"prefer_cheap": True},
    "hindsight+cheap": {"hindsight": True, "prefer_cheap": True},
    "oracle": {"check": "oracle"},
}


def _set_manifest_extra(model_dir: Path, **extra: object) -> None:
    from train.manifest import Manifest

    manifest = Manifest.load(model_dir)
    manifest.extra.update(extra)
    manifest.save(model_dir)


def _reference(held: list, eseeds: list[int], llm: str, base: list, base_calls: float) -> None:
    """The teacher behind the rules layer on the held-out tasks, against the prompted teacher."""
    from train.pipeline import paired_difference, run_policy

    ref = run_policy(held, "rules+teacher:model=sim", eseeds, "r", 16, llm).records
    rdiff = paired_difference(ref, base)
    ref_calls = sum(r.total_llm_calls for r in ref) / len(ref)
    print(json.dumps({"reference": "rules+teacher", "diff": rdiff["difference"], "se": rdiff["se"],
                      "calls ratio": round(ref_calls / base_calls, 3)}), flush=True)


def _variant_model(name: str, eps: list, train: list, n_seeds: int, llm: str, out: Path, dagger_rounds: int,
                   trained: dict[str, tuple[Path, int, float]]) -> list[tuple[Path, dict]]:
    """The fast policy of one dataset variant with the figures of its row (a DAgger variant: one per
    round, starting from the same variant without DAgger, trained once)."""
    from train.dagger import DaggerSettings, run_dagger
    from train.dataset import BuildConfig, build_examples, write_dataset
    from train.fast_policy import retry_discount_from, train_fast_policy_dir

    settings = dict(VARIANTS[name])
    check = settings.pop("dagger", None)
    key = json.dumps(settings, sort_keys=True)
    if key not in trained:
        discount = retry_discount_from(eps) if settings.pop("next_ranked", False) else 0.0
        prior = settings.pop("retry_prior", "fresh")
        build = BuildConfig(drop_idle=True, **settings)
        examples, stages = build_examples(eps, build)
        d = out / f"{name}-{n_seeds}"
        write_dataset(examples, stages, d / "data", config=build, sources=["t"])
        train_fast_policy_dir(d / "data", d / "model", name=name, retry_discount=discount)
        if prior != "fresh":  # a decision setting: the same weights, the prior named in the manifest
            _set_manifest_extra(d / "model", retry_prior=prior)
        trained[key] = (d, len(examples), discount)
    d, n_examples, discount = trained[key]
    row = {"variant": name, "teacher episodes": len(eps), "examples": n_examples, "retry discount": round(discount, 3)}
    if check is None:
        return [(d / "model", row)]
    dagger_out = out / f"{name}-{n_seeds}-dagger"
    result = run_dagger(d / "data", d / "model", train, n_seeds, dagger_out,
                        DaggerSettings(rounds=dagger_rounds, check=check, llm=llm), log=lambda m: print(m, flush=True))
    return [(dagger_out / f"round-{r.round}" / "model",
             {**row, "variant": f"{name} round {r.round}",
              "student oracle (training tasks)": round(r.student_oracle, 3),
              "labelled steps": r.labelled_steps, "examples added": r.examples_added,
              "agreement": round(r.agreement, 3), "calls per label": round(r.calls_per_label, 3)})
            for r in result.rounds]


def run_world(llm: str, tasks_spec: str, train_seeds: int, eval_seeds: int, train_subsets: list[int],
              variants: list[str], out: Path, reference: bool = True, dagger_rounds: int = 1) -> list[dict]:
    from rollout.tasks.loaders import load_tasks
    from train.pipeline import paired_difference, run_policy, split_tasks

    tasks = [t for t in load_tasks(tasks_spec) if t.gold_domain and t.gold_problem]
    train, held = split_tasks(tasks, 0.3, 0)
    tseeds = [10_000 + k for k in range(train_seeds)]
    eseeds = [20_000 + k for k in range(eval_seeds)]
    teacher = run_policy(train, "rules+teacher:model=sim", tseeds, "t", 16, llm).records
    base = run_policy(held, "teacher:model=sim", eseeds, "b", 16, llm).records
    base_calls = sum(r.total_llm_calls for r in base) / len(base)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "episodes.pkl", "wb") as fh:  # for looking at the data afterwards
        pickle.dump({"teacher": teacher, "baseline": base}, fh)
    if reference:
        _reference(held, eseeds, llm, base, base_calls)
    rows = []
    for n_seeds in train_subsets:
        eps = [e for e in teacher if e.seed in tseeds[:n_seeds]]
        trained: dict[str, tuple[Path, int, float]] = {}
        for name in variants:
            for model, row in _variant_model(name, eps, train, n_seeds, llm, out, dagger_rounds, trained):
                recs = run_policy(held, f"rules+model:{model}", eseeds, "f", 16, llm).records
                diff = paired_difference(recs, base)
                calls = sum(r.total_llm_calls for r in recs) / len(recs)
                rows.append({**row, "fast oracle": sum(r.success_oracle is True for r in recs) / len(recs),
                             "teacher oracle": sum(r.success_oracle is True for r in base) / len(base),
                             "diff": diff["difference"], "se": diff["se"], "pairs": diff["episodes"],
                             "calls ratio": round(calls / base_calls, 3)})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    from rollout.sim.world_family import draw_worlds, to_yaml

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", type=int, default=3)
    ap.add_argument("--world-seed", type=int, default=100)
    ap.add_argument("--default-world", action="store_true", help="also the default world")
    ap.add_argument("--tasks", default="planbench:all:10,ipc:bundled")
    ap.add_argument("--train-seeds", type=int, default=2)
    ap.add_argument("--train-subsets", default="", help="comma list of seed counts to train on (default: all)")
    ap.add_argument("--eval-seeds", type=int, default=3)
    ap.add_argument("--variants", default="base,hindsight")
    ap.add_argument("--out", default="")
    ap.add_argument("--dagger-rounds", type=int, default=1, help="rounds of the dagger variants")
    ap.add_argument("--no-reference", action="store_true", help="skip the rules+teacher reference row")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="fast-data-"))
    subsets = [int(x) for x in args.train_subsets.split(",")] if args.train_subsets else [args.train_seeds]
    worlds = [("default", "sim")] if args.default_world else []
    for w in draw_worlds(args.worlds, args.world_seed) if args.worlds else []:
        path = out / f"{w.name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_yaml(w))
        worlds.append((w.name, f"sim:world={path}"))
    print("SIMULATED (llm_backend=sim)", flush=True)
    for name, llm in worlds:
        t0 = time.perf_counter()
        print(f"== world {name}", flush=True)
        run_world(llm, args.tasks, args.train_seeds, args.eval_seeds, subsets, args.variants.split(","),
                  out / name, reference=not args.no_reference, dagger_rounds=args.dagger_rounds)
        print(f"   {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Generate a set: draw candidates in index order, drop isomorphic copies by canonical hash,
verify the rest with the real planner and validator (in this process, or on Ray for large
counts), keep the first COUNT gold tasks per (domain, level). The result depends only on the
arguments, never on how many workers verified it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import solvers
from rollout.tasks.generators import LEVELS, PRESETS, REGISTRY, GeneratorError, get_generator
from rollout.tasks.generators.canonical import HASH_VERSION, hash_problem_text
from rollout.tasks.generators.draft import GENERATOR_VERSION, Candidate, draft
from rollout.tasks.generators.genset import read_index, read_manifest, write_index, write_manifest, write_text
from rollout.tasks.generators.verify import Verdict, verify_batch

RAY_MIN_TASKS = 200  # below this, starting Ray costs more than it saves
CHUNK = 8  # candidates per Ray task
ROUND = 256  # candidates verified between progress reports
MAX_DRAWS_FACTOR = 20  # give up on a (domain, level) after this many draws per wanted task


@dataclass(frozen=True)
class GenerateRequest:
    jobs: tuple[tuple[str, str | None], ...]  # (domain, level); level None: only --size given
    count: int
    seed: int
    out: Path
    overrides: dict[str, int] = field(default_factory=dict)
    timeout_s: float = 10.0
    memory_mb: int = 2048
    use_ray: bool | None = None  # None: when the total count is large or an address is given
    address: str | None = None


@dataclass
class JobStats:
    domain: str
    level: str
    wanted: int
    gold: int = 0
    drawn: int = 0
    duplicates: int = 0
    rejected: Counter = field(default_factory=Counter)
    verify_cpu_s: float = 0.0
    wall_s: float = 0.0


Progress = Callable[[JobStats], None]


def expand(domain_arg: str, levels_arg: str | None) -> tuple[tuple[str, str | None], ...]:
    """DOMAIN may be a name, a comma list, 'all' or a preset name; LEVELS a name, a list or 'all'."""
    if domain_arg in PRESETS:
        if levels_arg:
            raise GeneratorError(f"preset {domain_arg!r} fixes its own levels; leave out --difficulty")
        return tuple((d, lv) for d, levels in PRESETS[domain_arg] for lv in levels)
    names = list(REGISTRY) if domain_arg == "all" else [d.strip() for d in domain_arg.split(",") if d.strip()]
    for name in names:
        get_generator(name)  # clear error for an unknown name
    if levels_arg in (None, ""):
        levels: tuple[str | None, ...] = (None,)
    elif levels_arg == "all":
        levels = LEVELS
    else:
        levels = tuple(lv.strip() for lv in levels_arg.split(",") if lv.strip())
        bad = [lv for lv in levels if lv not in LEVELS]
        if bad:
            raise GeneratorError(f"unknown difficulty {', '.join(bad)}; choose from {', '.join(LEVELS)} or all")
    return tuple((n, lv) for n in names for lv in levels)


def _verify(domain_text: str, batch: list[Candidate], req: GenerateRequest, ray_fn,  # noqa: ANN001
            planner: str) -> list[Verdict]:
    if ray_fn is None:
        return verify_batch(domain_text, batch, req.timeout_s, req.memory_mb, planner)
    import ray

    ref = ray.put(domain_text)
    refs = [ray_fn.remote(ref, batch[i:i + CHUNK], req.timeout_s, req.memory_mb, planner)
            for i in range(0, len(batch), CHUNK)]
    return [v for part in ray.get(refs) for v in part]


def _row(c: Candidate, v: Verdict, gen_domain_name: str, target_planner: str) -> dict:
    key = f"{c.domain}-{c.level}-{c.canonical_hash[:12]}"
    return {
        "task_id": f"gen/{c.domain}/{c.level}/{c.canonical_hash[:12]}", "domain": c.domain,
        "domain_name": gen_domain_name, "level": c.level, "seed": c.seed, "index": c.index,
        "generator_version": GENERATOR_VERSION, "sizes": c.sizes_json, "canonical_hash": c.canonical_hash,
        "objects": c.objects, "init_facts": c.init_facts, "goal_atoms": c.goal_atoms,
        "plan_length": v.plan_length, "plan_cost": v.plan_cost, "planner_cpu_s": v.planner_cpu_s,
        "planner_wall_s": v.planner_wall_s, "expansions": v.expansions,
        "planner": "fd:lama-first" if target_planner == "fd" else v.planner,
        "validator": solvers.validator_name(), "target_planner": target_planner,
        "domain_file": f"domains/{c.domain}.pddl",
        "problem_file": f"problems/{key}.pddl", "plan_file": f"plans/{key}.plan",
        "description_file": f"descriptions/{key}.txt",
    }


def run_job(domain: str, level: str | None, req: GenerateRequest, seen: set[str], ray_fn,  # noqa: ANN001
            progress: Progress | None = None) -> tuple[list[tuple[dict, Candidate, Verdict]], JobStats]:
    gen = get_generator(domain)
    domain_text = gen.domain_text()
    label = "custom" if req.overrides or level is None else level
    stats = JobStats(domain, label, req.count)
    t0 = time.monotonic()
    kept: list[tuple[dict, Candidate, Verdict]] = []
    index = 0
    max_draws = req.count * MAX_DRAWS_FACTOR + 50
    while len(kept) < req.count:
        want = req.count - len(kept)
        batch: list[Candidate] = []
        # a little over what is missing (rejections are rare), in rounds small enough to show progress
        while len(batch) < min(want + want // 16 + 1, ROUND) and index < max_draws:
            cand = draft(domain, level, req.seed, index, req.overrides)
            index += 1
            stats.drawn += 1
            if cand.canonical_hash in seen:
                stats.duplicates += 1
                continue
            seen.add(cand.canonical_hash)
            batch.append(cand)
        if not batch:
            raise GeneratorError(
                f"{domain}/{label}: only {len(kept)} distinct solvable tasks after {index} draws "
                f"({stats.duplicates} duplicates, rejected {dict(stats.rejected) or 'none'}); these sizes allow "
                f"too few different tasks - ask for fewer or larger ones")
        for cand, verdict in zip(batch, _verify(domain_text, batch, req, ray_fn, gen.target_planner),
                                  strict=True):
            stats.verify_cpu_s += verdict.planner_cpu_s
            if len(kept) >= req.count:
                seen.discard(cand.canonical_hash)  # verified but not needed: not part of the set
            elif verdict.status == "gold":
                kept.append((_row(cand, verdict, gen.domain_name, gen.target_planner), cand, verdict))
            else:
                stats.rejected[verdict.status] += 1  # never emitted: no gold task without a valid plan
        stats.gold = len(kept)
        stats.wall_s = time.monotonic() - t0
        if progress:
            progress(stats)
    return kept, stats


def wants_ray(req: GenerateRequest) -> bool:
    if req.use_ray is not None:
        return req.use_ray
    return req.address is not None or req.count * len(req.jobs) >= RAY_MIN_TASKS


def _existing_hashes(out: Path, rows: list[dict], manifest: dict) -> set[str]:
    """The hashes a new task must not repeat: as stored, or recomputed from the problem files when
    the set was hashed by another version of the canonical hash."""
    if not rows or manifest.get("hash_version") == HASH_VERSION:
        return {r["canonical_hash"] for r in rows}
    return {hash_problem_text((out / r["problem_file"]).read_text()) for r in rows}


def generate(req: GenerateRequest, progress: Progress | None = None) -> list[JobStats]:
    if req.count < 1:
        raise GeneratorError(f"--count must be at least 1, got {req.count}")
    out = Path(req.out)
    if out.exists() and not out.is_dir():
        raise GeneratorError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    rows = read_index(out) if (out / "index.parquet").exists() else []
    manifest = read_manifest(out)
    seen = _existing_hashes(out, rows, manifest)
    manifest["hash_version"] = HASH_VERSION
    jobs = req.jobs
    for domain, level in jobs:  # sizes a generator cannot make fail here, before any work starts
        draft(domain, level, req.seed, 0, req.overrides)
    ray_fn, started = None, False
    if wants_ray(req):
        import ray

        if not ray.is_initialized():
            ray.init(address=req.address or "local", include_dashboard=False, logging_level="ERROR",
                     log_to_driver=False)
            started = True
        ray_fn = ray.remote(num_cpus=1)(verify_batch)
    all_stats = []
    try:
        for domain, level in jobs:
            gen = get_generator(domain)
            write_text(out / "domains" / f"{domain}.pddl", gen.domain_text())
            kept, stats = run_job(domain, level, req, seen, ray_fn, progress)
            for row, cand, verdict in kept:
                write_text(out / row["problem_file"], cand.problem)
                write_text(out / row["plan_file"], verdict.plan)
                write_text(out / row["description_file"], cand.description + "\n")
            rows += [r for r, _, _ in kept]
            write_index(out, rows)  # each finished job is committed: a stop loses only the job in progress
            manifest["jobs"].append({
                "domain": domain, "level": stats.level, "count": req.count, "seed": req.seed,
                "sizes": req.overrides, "timeout_s": req.timeout_s, "generator_version": GENERATOR_VERSION,
                "drawn": stats.drawn, "duplicates": stats.duplicates, "rejected": dict(stats.rejected),
                "gold": stats.gold, "wall_s": round(stats.wall_s, 2)})
            write_manifest(out, manifest)
            all_stats.append(stats)
    finally:
        if started:
            import ray

            ray.shutdown()
    return all_stats

"""`halo tasks generate natural_plan`: Natural Plan tasks written as a generated task set (so
`gen:DIR` and `natural_plan:DIR` load them in every command) plus one file per task type in the
benchmark's own format (DIR/natural_plan/KIND.json, scored by `halo tasks score`).

Every task is checked before it is kept: its gold PDDL plan must be valid for its gold domain and
problem by the real validator, and the plan rendered as an answer must score 1 by the benchmark's
rules. The result depends only on (kinds, levels, count, seed)."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import solvers
from rollout.tasks.generators.genset import read_index, write_index, write_text
from rollout.tasks.natural_plan import calendar, meeting, trip
from rollout.tasks.natural_plan.answers import render_answer, score_answer
from rollout.tasks.natural_plan.data_file import KINDS
from rollout.tasks.natural_plan.instance import LEVELS, NPInstance
from solvers.errors import InputError

GENERATORS: dict[str, Callable[[random.Random, str, str], NPInstance | None]] = {
    "trip_planning": trip.generate, "meeting_planning": meeting.generate, "calendar_scheduling": calendar.generate}
VERSION = "np-1"
MAX_DRAWS_FACTOR = 20


class NaturalPlanGenError(InputError, ValueError):
    """Arguments the Natural Plan generators cannot honour; the message says which."""


@dataclass
class NPJobStats:
    kind: str
    level: str
    wanted: int
    kept: int = 0
    drawn: int = 0
    duplicates: int = 0
    rejected: int = 0
    wall_s: float = 0.0


def parse_kinds(arg: str) -> tuple[str, ...]:
    """'natural_plan' (all three) or 'natural_plan:trip_planning+meeting_planning'."""
    _, _, rest = arg.partition(":")
    kinds = tuple(k for k in rest.split("+") if k) or KINDS
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise NaturalPlanGenError(f"unknown Natural Plan task type {', '.join(bad)}; choose from {', '.join(KINDS)}")
    return kinds


def parse_levels(arg: str | None) -> tuple[str, ...]:
    levels = LEVELS if arg in (None, "", "all") else tuple(x.strip() for x in arg.split(",") if x.strip())
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad:
        raise NaturalPlanGenError(f"Natural Plan levels are {', '.join(LEVELS)} (or all); got {', '.join(bad)}")
    return levels


def corrupt_answer(inst: NPInstance) -> str:
    """A wrong answer close to the gold one: the benchmark's checker must score it 0."""
    gold = inst.example["golden_plan"]
    if inst.kind == "meeting_planning":  # one valid meeting fewer than the gold plan
        last_meeting = max(i for i, s in enumerate(gold) if s.startswith("You meet"))
        return "SOLUTION: " + " ".join(gold[:last_meeting])
    if inst.kind == "trip_planning":  # the last two cities' order swapped
        lines = gold.split("\n")
        cities = str(inst.example["cities"]).split("**")
        a, b = cities[-2], cities[-1]
        return "\n".join(ln.replace(a, "\0").replace(b, a).replace("\0", b) for ln in lines)
    day, _, rest = gold.partition(": ")[2].partition(", ")
    start = rest.split(" - ")[0]
    return gold.replace(f"{day}, {start}", f"{day}, {'8:00' if start != '8:00' else '7:00'}")


def _verify(inst: NPInstance, limits: solvers.Limits) -> tuple[bool, float]:
    verdict = solvers.validate(inst.domain_pddl, inst.problem_pddl, inst.gold_plan, limits=limits)
    answer_json = inst.gold_answer_json()
    rendered_right = score_answer(answer_json, render_answer(answer_json, inst.gold_plan))
    return bool(verdict.valid) and rendered_right, verdict.cpu_s


def _row(inst: NPInstance, key: str, seed: int, index: int, digest: str, cpu_s: float) -> dict:
    init_facts = inst.problem_pddl.split("(:init", 1)[1].split("(:goal", 1)[0].count("(")
    return {"task_id": f"gen/{inst.kind}/{inst.level}/{digest[:12]}", "domain": inst.kind,
            "domain_name": inst.domain_pddl.split("(domain ", 1)[1].split(")", 1)[0], "level": inst.level,
            "seed": seed, "index": index, "generator_version": VERSION,
            "sizes": json.dumps(inst.bucket_sizes, sort_keys=True), "canonical_hash": digest,
            "objects": sum(len(ln.split(" - ")[0].split()) for ln in inst.problem_pddl.split("(:init")[0]
                           .split("(:objects", 1)[1].splitlines()),
            "init_facts": init_facts, "goal_atoms": inst.problem_pddl.split("(:goal", 1)[1].count("(") - 1,
            "plan_length": len(inst.gold_plan.splitlines()), "plan_cost": float(len(inst.gold_plan.splitlines())),
            "planner_cpu_s": 0.0, "planner_wall_s": 0.0, "expansions": 0, "planner": "natural_plan:search",
            "validator": solvers.validator_name(), "target_planner": "fd", "validator_cpu_s": cpu_s,
            "domain_file": f"domains/{inst.kind}.pddl", "problem_file": f"problems/{key}.pddl",
            "plan_file": f"plans/{key}.plan", "description_file": f"descriptions/{key}.txt"}


def _files(out: Path, inst: NPInstance, key: str) -> None:
    write_text(out / "domains" / f"{inst.kind}.pddl", inst.domain_pddl)
    write_text(out / "problems" / f"{key}.pddl", inst.problem_pddl)
    write_text(out / "plans" / f"{key}.plan", inst.gold_plan)
    write_text(out / "descriptions" / f"{key}.txt", inst.example["prompt_0shot"] + "\n")
    write_text(out / "answers" / f"{key}.json", inst.gold_answer_json() + "\n")
    write_text(out / "specs" / f"{key}.json", json.dumps(inst.spec, sort_keys=True) + "\n")


def run_job(kind: str, level: str, count: int, seed: int, seen: set[str],
            limits: solvers.Limits) -> tuple[list[tuple[dict, NPInstance]], NPJobStats]:
    stats = NPJobStats(kind, level, count)
    t0 = time.monotonic()
    kept: list[tuple[dict, NPInstance]] = []
    index = 0
    while len(kept) < count:
        if index >= count * MAX_DRAWS_FACTOR + 50:
            raise NaturalPlanGenError(f"{kind}/{level}: only {len(kept)} tasks after {index} draws")
        name = f"{kind.replace('_', '-')}-{level}-{seed}-{index}"
        inst = GENERATORS[kind](random.Random(f"np|{kind}|{level}|{seed}|{index}"), level, name)
        index += 1
        stats.drawn += 1
        if inst is None:
            stats.rejected += 1
            continue
        digest = hashlib.sha256(inst.example["prompt_0shot"].encode()).hexdigest()
        if digest in seen:
            stats.duplicates += 1
            continue
        ok, cpu_s = _verify(inst, limits)
        if not ok:
            stats.rejected += 1
            continue
        seen.add(digest)
        kept.append((_row(inst, f"{kind}-{level}-{digest[:12]}", seed, index - 1, digest, cpu_s), inst))
    stats.kept, stats.wall_s = len(kept), time.monotonic() - t0
    return kept, stats


def benchmark_example(inst: NPInstance) -> dict:
    """The benchmark's fields plus the gold encoding, the structured spec and a corrupted answer."""
    return {**inst.example, "level": inst.level, "spec": inst.spec, "pddl_domain": inst.domain_pddl,
            "pddl_problem": inst.problem_pddl, "pddl_plan": inst.gold_plan, "pred_corrupted": corrupt_answer(inst)}


def generate_set(out: Path, kinds: tuple[str, ...], levels: tuple[str, ...], count: int, seed: int,
                 progress: Callable[[NPJobStats], None] | None = None) -> list[NPJobStats]:
    if count < 1:
        raise NaturalPlanGenError(f"--count must be at least 1, got {count}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = read_index(out) if (out / "index.parquet").exists() else []
    seen = {r["canonical_hash"] for r in rows}
    limits = solvers.Limits()
    all_stats = []
    for kind in kinds:
        exported = _read_export(out, kind)
        for level in levels:
            kept, stats = run_job(kind, level, count, seed, seen, limits)
            for row, inst in kept:
                _files(out, inst, row["problem_file"][len("problems/"):-len(".pddl")])
                exported[f"{kind}_example_{len(exported)}"] = benchmark_example(inst)
            rows += [r for r, _ in kept]
            write_index(out, rows)
            write_text(out / "natural_plan" / f"{kind}.json", json.dumps(exported, indent=1) + "\n")
            all_stats.append(stats)
            if progress:
                progress(stats)
    return all_stats


def _read_export(out: Path, kind: str) -> dict:
    path = out / "natural_plan" / f"{kind}.json"
    return json.loads(path.read_text()) if path.is_file() else {}

"""A generated task set on disk: DIR/index.parquet (one row per gold task) plus the files it
names (domains/, problems/, plans/, descriptions/) and DIR/manifest.json (how it was made)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from solvers.params import SpecError, read_pairs

INDEX = "index.parquet"
MANIFEST = "manifest.json"
COLUMNS = ("task_id", "domain", "domain_name", "level", "seed", "index", "generator_version", "sizes",
           "canonical_hash", "objects", "init_facts", "goal_atoms", "plan_length", "plan_cost", "planner_cpu_s",
           "planner_wall_s", "expansions", "planner", "validator", "target_planner", "domain_file", "problem_file",
           "plan_file", "description_file")


class GenSetError(SpecError):
    """A directory that is not a readable generated set; the message says what is wrong."""


def read_index(folder: Path) -> list[dict]:
    path = Path(folder) / INDEX
    if not path.is_file():
        raise GenSetError(f"{folder}: not a generated task set (no {INDEX}; make one with `halo tasks generate`)")
    try:
        rows = pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise GenSetError(f"{path}: unreadable Parquet index ({exc})") from exc
    missing = [c for c in ("task_id", "domain", "level", "problem_file") if rows and c not in rows[0]]
    if missing:
        raise GenSetError(f"{path}: index lacks columns {', '.join(missing)}")
    return rows


def write_index(folder: Path, rows: list[dict]) -> None:
    folder = Path(folder)
    table = pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in rows])
    tmp = folder / f".{INDEX}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, folder / INDEX)  # a reader never sees half an index


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else {"jobs": []}


def write_manifest(folder: Path, manifest: dict) -> None:
    tmp = Path(folder) / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, Path(folder) / MANIFEST)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


FILTER_KEYS = ("domain", "level", "seed")


def _filters(parts: list[str], spec: str) -> dict[str, tuple[bool, set[str]]]:
    """`domain=A+B:level!=hard` -> {key: (exclude?, values)}, read by the one spec parser."""
    pairs = read_pairs(":".join(parts), known=FILTER_KEYS, sep=":", negatable=True, spec=spec, what="--tasks",
                       error=GenSetError)
    return {p.key: (p.negated, {v for v in p.value.split("+") if v}) for p in pairs}


def _read(root: str, name: str) -> str:
    # plain strings, not pathlib: a 10,000-task set is 30,000 small files, and pathlib's joins
    # cost as much as the reads
    with open(os.path.join(root, name)) as f:
        return f.read()


def load_genset(spec: str) -> list:
    """Tasks of a generated set: gen:DIR[:N][:domain=A+B][:level=L1+L2][:seed=S1+S2] (`!=` excludes).

    N keeps N tasks taken round-robin over the (domain, level) groups, so a cut stays balanced.
    """
    from rollout.tasks.base import Task
    from rollout.tasks.natural_plan.data_file import KINDS as NATURAL_PLAN_KINDS
    from rollout.tasks.natural_plan.set_task import natural_plan_task

    parts = spec.split(":")[1:]
    if not parts or not parts[0]:
        raise GenSetError("gen needs a directory: gen:DIR[:N][:level=easy+medium]")
    folder = Path(parts[0])
    limit: int | None = None
    rest = []
    for part in parts[1:]:
        if part.isdigit():
            if int(part) <= 0:
                raise GenSetError(f"{spec!r}: the count must be a positive integer, got {part!r}")
            limit = int(part)
        else:
            rest.append(part)
    filters = _filters(rest, spec)
    rows = read_index(folder)
    for key, (negate, values) in filters.items():
        rows = [r for r in rows if (str(r[key]) in values) != negate]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["domain"], r["level"], r["seed"], r["index"])):
        groups.setdefault((r["domain"], r["level"]), []).append(r)
    ordered = [g[i] for i in range(max((len(g) for g in groups.values()), default=0))
               for g in groups.values() if i < len(g)]
    domains: dict[str, str] = {}
    tasks = []
    root = str(folder)
    for r in ordered[:limit]:
        try:
            if r["domain_file"] not in domains:
                domains[r["domain_file"]] = _read(root, r["domain_file"])
            tasks.append(Task(
                task_id=r["task_id"], family="generated", domain_name=r["domain"],
                description=_read(root, r["description_file"]).strip(),
                target_planner=r.get("target_planner") or "fd",
                scoring="gold_pddl", gold_domain=domains[r["domain_file"]],
                gold_problem=_read(root, r["problem_file"]), gold_plan=_read(root, r["plan_file"])))
            if r["domain"] in NATURAL_PLAN_KINDS:  # scored by the benchmark's checker, not by gold PDDL
                tasks[-1] = natural_plan_task(tasks[-1], root, r)
        except OSError as exc:
            raise GenSetError(f"{folder}: task {r['task_id']}: missing file ({exc})") from exc
    return tasks

"""The classical family as the HALO papers define it, as one generated set (the `classical-paper`
preset of `halo tasks generate`):

- Blocksworld Easy / Medium / Hard by OPTIMAL plan length 2-4 / 6-8 / 10-12 steps, the gold
  plan from an optimal search (Fast Downward `seq-opt-lmcut`: A* with LM-cut); candidates of
  3-8 blocks are drawn and each goes to the level its optimal length falls in (lengths 5 and 9,
  between the levels, are not used);
- Hanoi Easy / Medium / Hard / Extreme by disc count 3 / 4 / 5 / 6 on three pegs (the framework
  paper goes up to 6 discs), random arrangement to random arrangement so that 30 differ;
- childsnack and floortile sets of 19 tasks each, the size of the Borealis sets, drawn at the
  generators' medium level (their exact Borealis instances are not reproduced).

30 tasks per Blocksworld and Hanoi level. Every task is checked by the real planner and validator
like any generated task; the set is an ordinary generated set (`--tasks gen:DIR`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import solvers
from rollout.tasks.generators import get_generator
from rollout.tasks.generators.draft import Candidate, draft
from rollout.tasks.generators.genset import read_index, write_index, write_text
from rollout.tasks.generators.verify import Verdict, solve_and_check

BLOCKSWORLD_LENGTHS = {"easy": (2, 4), "medium": (6, 8), "hard": (10, 12)}
BLOCKSWORLD_BLOCKS = (3, 4, 5, 6, 7, 8)
HANOI_DISCS = {"easy": 3, "medium": 4, "hard": 5, "extreme": 6}
BOREALIS = {"childsnack": 19, "floortile": 19}
PER_LEVEL = 30
MAX_DRAWS = 4000


def _row(c: Candidate, v: Verdict, domain_name: str, planner: str) -> dict:
    from rollout.tasks.generators.pipeline import _row as pipeline_row

    row = pipeline_row(c, v, domain_name, "fd")
    row["planner"] = planner
    return row


def _keep(out: str, c: Candidate, v: Verdict, rows: list[dict], planner: str) -> None:
    gen = get_generator(c.domain)
    row = _row(c, v, gen.domain_name, planner)
    write_text(out / row["problem_file"], c.problem)
    write_text(out / row["plan_file"], v.plan)
    write_text(out / row["description_file"], c.description + "\n")
    rows.append(row)


def _blocksworld(out, per_level: int, seed: int, seen: set[str], limits: solvers.Limits,  # noqa: ANN001
                 rows: list[dict], log: Callable[[str], None]) -> None:
    domain = get_generator("blocksworld").domain_text()
    kept = dict.fromkeys(BLOCKSWORLD_LENGTHS, 0)
    for index in range(MAX_DRAWS):
        if all(n >= per_level for n in kept.values()):
            return
        blocks = BLOCKSWORLD_BLOCKS[index % len(BLOCKSWORLD_BLOCKS)]
        cand = draft("blocksworld", None, seed, index, {"blocks": blocks})
        if cand.canonical_hash in seen:
            continue
        verdict = solve_and_check(domain, cand.problem, limits, alias="seq-opt-lmcut")
        level = next((lv for lv, (lo, hi) in BLOCKSWORLD_LENGTHS.items() if lo <= verdict.plan_length <= hi), None)
        if verdict.status != "gold" or level is None or kept[level] >= per_level:
            continue
        seen.add(cand.canonical_hash)
        kept[level] += 1
        _keep(out, dataclasses.replace(cand, level=level), verdict, rows, "fd:seq-opt-lmcut")
    log(f"blocksworld: only {kept} after {MAX_DRAWS} draws")


def _fixed(out, domain: str, level: str, label: str, overrides: dict[str, int], count: int, seed: int,  # noqa: ANN001
           seen: set[str], limits: solvers.Limits, rows: list[dict]) -> int:
    text = get_generator(domain).domain_text()
    kept = 0
    for index in range(MAX_DRAWS):
        if kept >= count:
            break
        cand = draft(domain, level, seed, index, overrides)
        if cand.canonical_hash in seen:
            continue
        verdict = solve_and_check(text, cand.problem, limits)
        if verdict.status != "gold":
            continue
        seen.add(cand.canonical_hash)
        kept += 1
        _keep(out, dataclasses.replace(cand, level=label), verdict, rows, "fd:lama-first")
    return kept


def generate_paper_classical(out, per_level: int = PER_LEVEL, seed: int = 0,  # noqa: ANN001
                             log: Callable[[str], None] = print) -> int:
    """Write the set into `out` (a directory; tasks are added to an existing set); the number kept."""
    from pathlib import Path

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = read_index(out) if (out / "index.parquet").exists() else []
    before = len(rows)
    seen = {r["canonical_hash"] for r in rows}
    limits = solvers.Limits(timeout_s=30.0)
    for name in ("blocksworld", "hanoi", *BOREALIS):
        write_text(out / "domains" / f"{name}.pddl", get_generator(name).domain_text())
    _blocksworld(out, per_level, seed, seen, limits, rows, log)
    log(f"blocksworld: {len(rows) - before} tasks by optimal plan length")
    for level, discs in HANOI_DISCS.items():
        n = _fixed(out, "hanoi", "medium", level, {"discs": discs, "pegs": 3, "tower": 0}, per_level, seed, seen,
                   limits, rows)
        log(f"hanoi/{level}: {n} tasks with {discs} discs")
    for name, count in BOREALIS.items():
        n = _fixed(out, name, "medium", "borealis", {}, round(count * per_level / PER_LEVEL), seed, seen, limits,
                   rows)
        log(f"{name}/borealis: {n} tasks")
    write_index(out, rows)
    return len(rows) - before

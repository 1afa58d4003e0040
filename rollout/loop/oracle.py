"""Oracle-correct: does the loop's final plan solve the real task?

The plan is checked against the task's gold domain/problem with the real validator, after
mapping the loop's action and object names back to the gold names: first through an explicit
table (the simulated world knows how it renamed things), then by normalising case, '_' and '-'.
Tasks without gold PDDL fall back to the ground-truth plan, and tasks with neither get None.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import solvers
from rollout.pddl.sections import section, sections, typed_list
from rollout.pddl.sexpr import SExprError, parse_shared
from rollout.tasks.base import Task


@dataclass(frozen=True)
class OracleVerdict:
    correct: bool | None  # None: no gold answer to check against
    method: str  # gold_pddl | ground_truth_plan | none
    detail: str = ""
    solver_cpu_s: float = 0.0  # the gold-PDDL validation's solver CPU, counted with the episode's


def normalise_name(name: str) -> str:
    return re.sub(r"[_\s]+", "-", name.strip().lower())


def gold_names(task: Task) -> set[str]:
    """Action, object and constant names of the gold PDDL (lower case)."""
    return set(_gold_names(task.gold_domain, task.gold_problem))


@functools.lru_cache(maxsize=1024)
def _gold_names(gold_domain: str, gold_problem: str) -> frozenset[str]:
    names: set[str] = set()
    try:
        if gold_domain:
            domain = parse_shared(gold_domain)  # the simulated world parsed it already
            for kind in (":action", ":durative-action"):
                names.update(a[1].lower() for a in sections(domain, kind) if len(a) > 1 and isinstance(a[1], str))
            consts = section(domain, ":constants")
            if consts:
                names.update(n.lower() for n, _ in typed_list(consts[1:]))
        if gold_problem:
            objs = section(parse_shared(gold_problem), ":objects")
            if objs:
                names.update(n.lower() for n, _ in typed_list(objs[1:]))
    except SExprError:
        pass
    return frozenset(names)


def map_plan(plan_text: str, known: set[str], name_map: dict[str, str] | None = None) -> str:
    """Rewrite each step's names into gold names where a mapping is known."""
    table = {normalise_name(k): v for k, v in (name_map or {}).items()}
    by_norm = {normalise_name(n): n for n in known}

    def gold(name: str) -> str:
        norm = normalise_name(name)
        return table.get(norm) or by_norm.get(norm) or name

    steps = solvers.parse_plan(plan_text)
    out = []
    for step in steps:
        mapped = solvers.PlanStep(gold(step.name), tuple(gold(a) for a in step.args), step.start, step.duration)
        out.append(mapped)
    return solvers.plan_to_text(out)


def check_benchmark_answer(task: Task, plan_text: str, name_map: dict[str, str] | None = None) -> OracleVerdict:
    """Natural Plan: the plan, in gold names, rendered as the benchmark's answer and scored by its rules."""
    from rollout.tasks.natural_plan.answers import render_answer, score_answer

    if not task.gold_domain or not task.gold_problem:
        return OracleVerdict(None, "benchmark_checker", "no PDDL encoding of this statement, so a plan cannot be "
                             "rendered as the benchmark's answer (score answers with `halo tasks score`)")
    if not plan_text.strip():
        return OracleVerdict(False, "benchmark_checker", "no plan")
    try:
        mapped = map_plan(plan_text, gold_names(task), name_map)
    except ValueError as exc:
        return OracleVerdict(False, "benchmark_checker", f"unreadable plan: {exc}")
    answer = render_answer(task.gold_answer or "", mapped)
    if score_answer(task.gold_answer or "", answer):
        return OracleVerdict(True, "benchmark_checker", "right by the benchmark's scoring")
    return OracleVerdict(False, "benchmark_checker", f"wrong by the benchmark's scoring: {answer[-300:]}")


def check_plan(task: Task, plan_text: str, *, name_map: dict[str, str] | None = None,
               limits: solvers.Limits | None = None) -> OracleVerdict:
    if task.gold_answer:
        return check_benchmark_answer(task, plan_text, name_map)
    if task.gold_domain and task.gold_problem:
        if not plan_text.strip():
            return OracleVerdict(False, "gold_pddl", "no plan")
        try:
            mapped = map_plan(plan_text, gold_names(task), name_map)
        except ValueError as exc:
            return OracleVerdict(False, "gold_pddl", f"unreadable plan: {exc}")
        verdict = solvers.validate(task.gold_domain, task.gold_problem, mapped, limits=limits or solvers.Limits())
        detail = "valid on the gold PDDL" if verdict.valid else \
            f"{verdict.category.value}: {(verdict.output_tail or verdict.message).strip()[-300:]}"
        return OracleVerdict(bool(verdict.valid), "gold_pddl", detail, verdict.cpu_s)
    if task.gold_plan and task.family != "natural_plan":
        try:
            ours = [(normalise_name(s.name), tuple(map(normalise_name, s.args))) for s in solvers.parse_plan(plan_text)]
            gold = [(normalise_name(s.name), tuple(map(normalise_name, s.args)))
                    for s in solvers.parse_plan(task.gold_plan)]
        except ValueError as exc:
            return OracleVerdict(False, "ground_truth_plan", f"unreadable plan: {exc}")
        same = ours == gold
        return OracleVerdict(same, "ground_truth_plan", "matches" if same else "differs from the ground truth")
    return OracleVerdict(None, "none", f"no gold answer checker for family {task.family!r}")

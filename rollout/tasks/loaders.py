"""Task loaders (PlanBench, IPC-style folders, temporal folders, Natural Plan JSON) and the
registry of task sources that `load_tasks(spec)` dispatches on."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rollout.tasks.base import PLANBENCH_DOMAINS, Task, TaskSpecError
from rollout.tasks.describe import describe
from solvers.params import split_spec
from solvers.registry import Registry

DATA = Path(__file__).with_name("data")
NATURAL_PLAN_KINDS = ("trip_planning", "meeting_planning", "calendar_scheduling")


def load_planbench(domain: str, root: Path = DATA / "planbench") -> list[Task]:
    folder = root / domain
    if domain not in PLANBENCH_DOMAINS or not folder.is_dir():
        raise TaskSpecError(f"unknown PlanBench domain {domain!r}; known: {', '.join(PLANBENCH_DOMAINS)}")
    gold_domain = (folder / "domain.pddl").read_text()
    intro = (folder / "intro.txt").read_text().strip()
    tasks = []
    for lineno, line in enumerate((folder / "tasks.jsonl").read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            iid = int(row["instance_id"])
            description = f"{intro}\n\n[STATEMENT]\n{row['statement']}"
            tasks.append(Task(
                task_id=f"planbench/{domain}/instance-{iid}", family="planbench", domain_name=domain,
                description=description, target_planner="fd", scoring="gold_pddl",
                gold_domain=gold_domain, gold_problem=row["instance"], gold_plan=row["ground_truth_plan"],
            ))
        except (KeyError, ValueError, TypeError) as exc:
            raise TaskSpecError(f"{folder / 'tasks.jsonl'}:{lineno}: bad task row ({exc})") from exc
    return tasks


def load_pddl_folder(folder: Path, *, family: str, target_planner: str) -> list[Task]:
    """A folder holding domain.pddl and one or more problem files (*.pddl)."""
    folder = Path(folder)
    domain_file = folder / "domain.pddl"
    if not domain_file.is_file():
        raise TaskSpecError(f"{folder}: no domain.pddl")
    problems = sorted(p for p in folder.glob("*.pddl") if p.name != "domain.pddl")
    if not problems:
        raise TaskSpecError(f"{folder}: no problem files next to domain.pddl")
    gold_domain = domain_file.read_text()
    tasks = []
    for prob in problems:
        text = prob.read_text()
        try:
            desc = describe(gold_domain, text)
        except ValueError as exc:
            raise TaskSpecError(f"{prob}: cannot read PDDL ({exc})") from exc
        intro = ("Find a plan for the following task. Actions are instantaneous."
                 if target_planner == "fd" else
                 "Find a temporal plan (start times and durations) for the following task.")
        tasks.append(Task(
            task_id=f"{family}/{folder.name}/{prob.stem}", family=family, domain_name=folder.name,
            description=f"{intro}\n\n{desc}", target_planner=target_planner,  # type: ignore[arg-type]
            scoring="gold_pddl", gold_domain=gold_domain, gold_problem=text,
        ))
    return tasks


def _natural_plan_kind(key: str, example: dict) -> str:
    for kind in NATURAL_PLAN_KINDS:
        if key.startswith(kind):
            return kind
    if "cities" in example:
        return "trip_planning"
    if "dist_matrix" in example:
        return "meeting_planning"
    if "num_days" in example:
        return "calendar_scheduling"
    raise TaskSpecError(f"natural plan example {key!r}: cannot tell its kind from the key or fields")


def load_natural_plan(path: Path) -> list[Task]:
    """Natural Plan's JSON: {example_key: {prompt_0shot, prompt_5shot, golden_plan, ...}}.

    The benchmark's own files carry no PDDL: their tasks are scored with `halo tasks score`, and
    the simulated world cannot run them. Files written by `halo tasks generate natural_plan` add
    pddl_domain, pddl_problem and pddl_plan (the gold encoding), so the loop and oracle run on them.
    """
    from rollout.tasks.natural_plan.instance import ANSWER_FIELDS

    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TaskSpecError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise TaskSpecError(f"{path}: expected a JSON object of examples keyed by id")
    tasks = []
    for key, example in data.items():
        if not isinstance(example, dict):
            raise TaskSpecError(f"{path}: example {key!r} is not an object")
        missing = [f for f in ("prompt_0shot", "golden_plan") if f not in example]
        if missing:
            raise TaskSpecError(f"{path}: example {key!r} lacks {', '.join(missing)}")
        kind = _natural_plan_kind(key, example)
        pddl = {f: example.get(f"pddl_{f}") for f in ("domain", "problem", "plan")}
        spec = example.get("spec") or {k: v for k, v in example.items()
                                       if k not in ANSWER_FIELDS and not k.startswith(("pddl_", "prompt_"))}
        answer = {k: v for k, v in example.items() if not k.startswith(("pddl_", "prompt_")) and k != "spec"}
        tasks.append(Task(
            task_id=f"natural_plan/{kind}/{key}", family="natural_plan", domain_name=kind,
            description=example["prompt_0shot"], target_planner="fd", scoring="checker",
            spec_json=json.dumps(spec, sort_keys=True), gold_domain=pddl["domain"], gold_problem=pddl["problem"],
            gold_plan=pddl["plan"], gold_answer=json.dumps({"kind": kind, **answer}, sort_keys=True),
        ))
    return tasks


def bundled_ipc(kind: str) -> list[Task]:
    root = DATA / ("ipc" if kind == "classical" else "temporal")
    planner = "fd" if kind == "classical" else "temporal"
    return [t for folder in sorted(root.iterdir()) if folder.is_dir()
            for t in load_pddl_folder(folder, family=kind, target_planner=planner)]


# A task source reads the part of a spec after "NAME:" and returns its tasks, raising
# TaskSpecError for anything it cannot load. Adding one is a function plus one line here
# (or `TASK_SOURCES.register(...)` in the code that adds it); `example` words the help.
TaskSource = Callable[[str], list[Task]]
TASK_SOURCES: Registry[TaskSource] = Registry("task source")


def _bundled(rest: str) -> list[Task]:
    if rest:
        raise TaskSpecError(f"unknown task spec 'bundled:{rest}'; 'bundled' takes no argument")
    return load_tasks("planbench:all") + bundled_ipc("classical") + bundled_ipc("temporal")


def _planbench(rest: str) -> list[Task]:
    name, _, count = rest.partition(":")
    limit = _limit(count, f"planbench:{rest}")
    domains = PLANBENCH_DOMAINS if name == "all" else (name,)
    return [t for d in domains for t in load_planbench(d)[:limit]]


def _pddl_folders(kind: str) -> TaskSource:
    family, planner = ("classical", "fd") if kind == "ipc" else ("temporal", "temporal")

    def source(rest: str) -> list[Task]:
        if rest in ("", "bundled"):
            return bundled_ipc(family)
        path, _, count = rest.partition(":") if not Path(rest).exists() else (rest, "", "")
        return load_pddl_folder(Path(path), family=family, target_planner=planner)[:_limit(count, f"{kind}:{rest}")]

    return source


def _generated(rest: str) -> list[Task]:
    from rollout.tasks.generators.genset import GenSetError, load_genset

    try:
        return load_genset(f"gen:{rest}")
    except GenSetError as exc:
        raise TaskSpecError(str(exc)) from exc


def _natural_plan(rest: str) -> list[Task]:
    if not rest:
        raise TaskSpecError("natural_plan needs a file or a generated set: natural_plan:PATH.json | natural_plan:DIR")
    if Path(rest.split(":")[0]).is_dir():
        return _generated(rest)  # a set made by `halo tasks generate natural_plan`, with gen: filters
    if not Path(rest).is_file():
        raise TaskSpecError(f"natural_plan file not found: {rest}")
    return load_natural_plan(Path(rest))


TASK_SOURCES.register("planbench", _planbench, example="planbench:blocksworld:10")
TASK_SOURCES.register("ipc", _pddl_folders("ipc"), example="ipc:DIR")
TASK_SOURCES.register("temporal", _pddl_folders("temporal"), example="temporal:DIR")
TASK_SOURCES.register("natural_plan", _natural_plan, example="natural_plan:FILE.json|DIR")
TASK_SOURCES.register("gen", _generated, example="gen:DIR")
TASK_SOURCES.register("planbench-dir", "rollout.tasks.planbench_dir:load_planbench_dir", example="planbench-dir:DIR")
TASK_SOURCES.register("bundled", _bundled, example="bundled")


@dataclass(frozen=True)
class TaskSpec:
    """One task source and what it reads: `planbench:blocksworld:10` -> source "planbench", rest
    "blocksworld:10" (the source's own syntax: positional parts, or `key=value` filters read with
    solvers.params)."""

    text: str
    source: str  # a key of TASK_SOURCES
    rest: str = ""

    @classmethod
    def parse(cls, spec: str) -> tuple[TaskSpec, ...]:
        """One spec, or several joined with ','."""
        parts = [p.strip() for p in spec.split(",") if p.strip()] if "," in spec else [spec]
        return tuple(cls._one(part) for part in parts)

    @classmethod
    def _one(cls, text: str) -> TaskSpec:
        source, rest = split_spec(text)
        if source not in TASK_SOURCES:
            examples = ", ".join(TASK_SOURCES.meta(name).get("example", name) for name in TASK_SOURCES.names())
            raise TaskSpecError.of(text, f"unknown task source {source!r}; try {examples}", field="source",
                                   known=TASK_SOURCES.names(), what="--tasks")
        return cls(text, source, rest)

    def load(self) -> list[Task]:
        return TASK_SOURCES.get(self.source)(self.rest)


def load_tasks(spec: str) -> list[Task]:
    """Load tasks from a spec:

    planbench:DOMAIN[:N] | planbench:all[:N] | ipc:DIR | ipc:bundled | temporal:DIR |
    temporal:bundled | natural_plan:FILE.json | gen:DIR[:N][:level=A+B] (a generated set) |
    planbench-dir:DIR[:DOMAIN][:N] (a full PlanBench data directory) | bundled (every bundled task) |
    several specs joined with ','. N keeps the first N tasks (per domain for planbench:all).
    The part before the first ':' names a source in TASK_SOURCES (`TaskSpec`).
    """
    return [t for one in TaskSpec.parse(spec) for t in one.load()]


def _limit(count: str, spec: str) -> int | None:
    if not count:
        return None
    if not count.isdigit() or int(count) <= 0:
        raise TaskSpecError(f"{spec!r}: the count must be a positive integer, got {count!r}")
    return int(count)


def find_task(task_id: str, spec: str = "bundled") -> Task:
    for task in load_tasks(spec):
        if task.task_id == task_id:
            return task
    raise TaskSpecError(f"no task {task_id!r} in {spec!r}")

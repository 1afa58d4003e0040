"""A full PlanBench data directory as tasks (the bundled subset stays the embedded default).

Layout, per domain: DIR/<domain>/{domain.pddl, instances/instance-N.pddl, task1.json[, config.yaml]},
as in PlanBench's release rearranged one folder per domain (`task1.json` is the plan-generation
prompt file, `config.yaml` maps blocksworld's colour names to object names)."""

from __future__ import annotations

import json
from pathlib import Path

from rollout.tasks.base import PLANBENCH_DOMAINS, Task, TaskSpecError


def _domain_tasks(folder: Path, domain: str) -> list[Task]:
    from rollout.tasks.bundle import _plan_names_to_instance, split_query

    for need in ("domain.pddl", "task1.json"):
        if not (folder / need).is_file():
            raise TaskSpecError(f"{folder}: no {need} (expected a PlanBench domain folder)")
    try:
        entries = json.loads((folder / "task1.json").read_text())["instances"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise TaskSpecError(f"{folder / 'task1.json'}: not a PlanBench prompt file ({exc})") from exc
    gold_domain = (folder / "domain.pddl").read_text()
    tasks = []
    for entry in entries:
        try:
            iid = int(entry["instance_id"])
            problem = folder / "instances" / f"instance-{iid}.pddl"
            intro, statement = split_query(entry["query"])
            plan = entry["ground_truth_plan"]
            if (folder / "config.yaml").is_file():
                plan = _plan_names_to_instance(plan, domain, folder / "config.yaml")
            tasks.append(Task(
                task_id=f"planbench/{domain}/instance-{iid}", family="planbench", domain_name=domain,
                description=f"{intro}\n\n[STATEMENT]\n{statement}", target_planner="fd", scoring="gold_pddl",
                gold_domain=gold_domain, gold_problem=problem.read_text(), gold_plan=plan))
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            raise TaskSpecError(f"{folder / 'task1.json'}: bad entry ({exc!r})") from exc
        except OSError as exc:
            raise TaskSpecError(f"{folder}: instance file missing ({exc})") from exc
    return tasks


def load_planbench_dir(rest: str) -> list[Task]:
    """rest = DIR[:DOMAIN][:N]; DOMAIN 'all' (default) takes every PlanBench domain folder found."""
    path, _, tail = rest.partition(":")
    domain, _, count = tail.partition(":")
    if domain.isdigit() and not count:
        domain, count = "", domain
    root = Path(path)
    if not path or not root.is_dir():
        raise TaskSpecError(f"planbench-dir: {path!r} is not a directory (planbench-dir:DIR[:DOMAIN][:N])")
    if count and (not count.isdigit() or int(count) <= 0):
        raise TaskSpecError(f"planbench-dir: the count must be a positive integer, got {count!r}")
    limit = int(count) if count else None
    names = [d for d in PLANBENCH_DOMAINS if (root / d).is_dir()] if domain in ("", "all") else [domain]
    if domain not in ("", "all") and domain not in PLANBENCH_DOMAINS:
        raise TaskSpecError(f"unknown PlanBench domain {domain!r}; known: {', '.join(PLANBENCH_DOMAINS)}")
    if not names:
        raise TaskSpecError(f"{root}: no PlanBench domain folders ({', '.join(PLANBENCH_DOMAINS)})")
    return [t for d in names for t in _domain_tasks(root / d, d)[:limit]]

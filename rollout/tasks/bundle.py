"""Rebuild the bundled task set (rollout/tasks/data/) from a benchmark checkout.

    python -m rollout.tasks.bundle /path/to/benchmarks

Only maintainers run this; the package reads the bundled files and never needs the checkout.
PlanBench queries are stored as one shared domain introduction per domain plus each
instance's own statement, which keeps the bundle small.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import yaml

DATA = Path(__file__).with_name("data")
PLANBENCH_COUNTS = {
    "blocksworld": 200,
    "mystery_blocksworld": 25,
    "depots": 25,
    "logistics": 25,
    "obfuscated_deceptive_logistics": 25,
}
IPC_PICKS = {"blocksworld": 4, "depots": 3, "logistics": 3, "childsnack": 2, "hanoi": 2}
TEMPORAL_PICKS = {"rovers": 3, "satellite": 3}


def split_query(query: str) -> tuple[str, str]:
    """Return (domain introduction, the task's own statement) of a one-shot PlanBench query."""
    intro = query.split("[STATEMENT]", 1)[0].strip()
    statement = query.rsplit("[STATEMENT]", 1)[1]
    statement = statement.split("My plan is as follows", 1)[0].strip()
    return intro, statement


def _plan_names_to_instance(plan: str, domain: str, config_path: Path) -> str:
    """PlanBench writes blocksworld ground-truth plans with colour names; map them to the
    instance's object names so the plan validates against the gold PDDL."""
    if domain != "blocksworld":
        return plan
    config = yaml.safe_load(config_path.read_text())
    colour_to_obj = {v.split()[0]: k for k, v in config["encoded_objects"].items()}
    out = []
    for line in plan.splitlines():
        line = line.strip()
        if not line:
            continue
        name, *args = line.strip("()").split()
        out.append("(" + " ".join([name, *(colour_to_obj.get(a, a) for a in args)]) + ")")
    return "\n".join(out) + "\n"


def bundle_planbench(src: Path) -> None:
    for domain, count in PLANBENCH_COUNTS.items():
        d_src = src / "planbench" / domain
        d_out = DATA / "planbench" / domain
        d_out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(d_src / "domain.pddl", d_out / "domain.pddl")
        entries = json.loads((d_src / "task1.json").read_text())["instances"][:count]
        intro = ""
        with (d_out / "tasks.jsonl").open("w") as fh:
            for entry in entries:
                intro, statement = split_query(entry["query"])
                iid = entry["instance_id"]
                row = {
                    "instance_id": iid,
                    "statement": statement,
                    "instance": (d_src / "instances" / f"instance-{iid}.pddl").read_text(),
                    "ground_truth_plan": _plan_names_to_instance(
                        entry["ground_truth_plan"], domain, d_src / "config.yaml"),
                }
                fh.write(json.dumps(row) + "\n")
        (d_out / "intro.txt").write_text(intro + "\n")


def _copy_folder(src: Path, out: Path, problems: list[Path]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src / "domain.pddl", out / "domain.pddl")
    for p in problems:
        shutil.copyfile(p, out / p.name)


def bundle_ipc(src: Path) -> None:
    for name, n in IPC_PICKS.items():
        folder = src / "ipc" / name
        problems = sorted((p for p in folder.glob("*.pddl") if p.name != "domain.pddl"),
                          key=lambda p: (p.stat().st_size, p.name))[:n]
        _copy_folder(folder, DATA / "ipc" / name, problems)
    for name, n in TEMPORAL_PICKS.items():
        folder = src / "ipc-temporal" / name
        problems = sorted((p for p in folder.glob("instance-*.pddl")),
                          key=lambda p: int(p.stem.split("-")[1]))[:n]
        _copy_folder(folder, DATA / "temporal" / name, problems)


if __name__ == "__main__":
    source = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/benchmarks")
    bundle_planbench(source)
    bundle_ipc(source)
    print(f"bundled into {DATA}")

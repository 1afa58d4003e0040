"""Task generators: determinism, de-duplication under renaming, clear errors for impossible
sizes, and no unsolvable instance ever emitted as gold. Planner and validator are the real,
sandboxed ones."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import solvers
from rollout.loop.oracle import check_plan
from rollout.tasks import TaskSpecError, load_tasks
from rollout.tasks.generators import REGISTRY, GeneratorError, get_generator
from rollout.tasks.generators.base import LEVELS, parse_sizes
from rollout.tasks.generators.canonical import hash_problem_text
from rollout.tasks.generators.draft import draft
from rollout.tasks.generators.pipeline import GenerateRequest, expand, generate

TIMING = {"planner_cpu_s", "planner_wall_s"}


def _gen(out: Path, jobs: tuple, count: int = 3, seed: int = 0, **kw) -> list:
    return generate(GenerateRequest(jobs=jobs, count=count, seed=seed, out=out, use_ray=False, **kw))


def _rows(folder: Path) -> list[dict]:
    rows = pq.read_table(folder / "index.parquet").to_pylist()
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_same_seed_same_set_and_another_seed_another(tmp_path: Path) -> None:
    jobs = (("blocksworld", "easy"), ("miconic", "medium"))
    _gen(tmp_path / "a", jobs)
    _gen(tmp_path / "b", jobs)
    _gen(tmp_path / "c", jobs, seed=1)
    a, b, c = _rows(tmp_path / "a"), _rows(tmp_path / "b"), _rows(tmp_path / "c")
    assert len(a) == 6 and a == b
    for r in a:
        for key in ("problem_file", "plan_file", "description_file"):
            assert (tmp_path / "a" / r[key]).read_text() == (tmp_path / "b" / r[key]).read_text()
    assert {r["canonical_hash"] for r in a} != {r["canonical_hash"] for r in c}


def test_every_draft_is_deterministic_and_each_generator_has_all_levels() -> None:
    for name in REGISTRY:
        gen = get_generator(name)
        assert tuple(gen.levels) == LEVELS
        for level in LEVELS:
            assert draft(name, level, 3, 5, {}) == draft(name, level, 3, 5, {})


def _rename_and_shuffle(problem: str, rng: random.Random) -> str:
    """An isomorphic copy: every object renamed, init and goal facts reordered."""
    objs = re.search(r"\(:objects(.*?)\)", problem, re.S).group(1)
    names = sorted({w for w in objs.split() if w != "-"} - {t for t in re.findall(r"- (\S+)", objs)})
    new = [f"zz{i}" for i in range(len(names))]
    rng.shuffle(new)
    mapping = dict(zip(names, new, strict=True))
    text = re.sub(r"[A-Za-z][\w-]*", lambda m: mapping.get(m.group(0), m.group(0)), problem)
    init = re.search(r"\(:init\n(.*?)\n  \)", text, re.S).group(1).splitlines()
    goal = re.search(r"\(and\n(.*?)\n    \)", text, re.S).group(1).splitlines()
    rng.shuffle(init)
    rng.shuffle(goal)
    text = re.sub(r"\(:init\n.*?\n  \)", lambda _: "(:init\n" + "\n".join(init) + "\n  )", text, flags=re.S)
    return re.sub(r"\(and\n.*?\n    \)", lambda _: "(and\n" + "\n".join(goal) + "\n    )", text, flags=re.S)


@pytest.mark.parametrize("domain", list(REGISTRY))
def test_a_renamed_reordered_copy_has_the_same_hash_and_a_changed_task_does_not(domain: str) -> None:
    rng = random.Random(domain)
    cand = draft(domain, "medium", 0, 1, {})
    copy = _rename_and_shuffle(cand.problem, rng)
    assert copy != cand.problem
    assert hash_problem_text(copy) == hash_problem_text(cand.problem) == cand.canonical_hash
    other = next(c for i in range(2, 50) if (c := draft(domain, "medium", 0, i, {})).problem != cand.problem)
    if other.canonical_hash == cand.canonical_hash:  # two draws may be isomorphic: then both hash alike
        return
    assert hash_problem_text(other.problem) != cand.canonical_hash


def test_a_renamed_copy_in_a_set_is_detected_as_a_duplicate(tmp_path: Path) -> None:
    _gen(tmp_path / "s", (("hanoi", "easy"),), count=4)
    rows = _rows(tmp_path / "s")
    hashes = {r["canonical_hash"] for r in rows}
    assert len(hashes) == 4
    for r in rows:
        copy = _rename_and_shuffle((tmp_path / "s" / r["problem_file"]).read_text(), random.Random(r["index"]))
        assert hash_problem_text(copy) in hashes
    stats = _gen(tmp_path / "s", (("hanoi", "easy"),), count=2)  # the same draws again: all duplicates first
    assert stats[0].duplicates >= 4 and len(_rows(tmp_path / "s")) == 6


def test_a_set_hashed_by_an_older_hash_version_is_rehashed_before_it_grows(tmp_path: Path) -> None:
    """Stored hashes from another canonical-hash version would not match new draws of the same tasks."""
    import json

    from rollout.tasks.generators.genset import read_index, write_index

    _gen(tmp_path / "s", (("hanoi", "easy"),), count=4)
    rows = read_index(tmp_path / "s")
    write_index(tmp_path / "s", [dict(r, canonical_hash=f"old-{i}") for i, r in enumerate(rows)])
    manifest_path = tmp_path / "s" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest.pop("hash_version", None)
    manifest_path.write_text(json.dumps(manifest))
    stats = _gen(tmp_path / "s", (("hanoi", "easy"),), count=2)
    assert stats[0].duplicates >= 4 and len(read_index(tmp_path / "s")) == 6
    assert json.loads(manifest_path.read_text())["hash_version"] == "2"


@pytest.mark.parametrize(("domain", "size", "message"), [
    ("blocksworld", "blocks=0", r"blocks=0 is out of range; number of blocks \(2\.\.40\)"),
    ("blocksworld", "blocks=1000", r"out of range"),
    ("blocksworld", "towers=3", r"no knob 'towers'"),
    ("blocksworld", "blocks=many", r"blocks must be an integer"),
    ("logistics", "cities=1,locations=1", r"needs at least 2 locations"),
    ("hanoi", "discs=1", r"only \d+ distinct solvable tasks"),
    ("satellite", "directions=2,modes=1,images=5", r"5 images asked for, .* allow only 2"),
    ("rovers", "soil=0,rock=0,images=0", r"needs at least one goal"),
    ("rovers", "waypoints=3,soil=4", r"4 soil samples asked for, but 3 waypoints"),
    ("floortile", "robots=3,columns=2", r"3 robots asked for, but the start row has only 2 tiles"),
    ("rovers", "objectives=1,modes=1,images=2", r"2 images asked for, but 1 objectives x 1 modes allow only 1"),
])
def test_an_impossible_size_is_a_clear_error_and_writes_no_task(tmp_path: Path, domain: str, size: str,
                                                                message: str) -> None:
    with pytest.raises(GeneratorError, match=message):
        _gen(tmp_path / "s", expand(domain, None), count=5, overrides=parse_sizes(size))
    assert not (tmp_path / "s" / "index.parquet").exists()


def test_unknown_generator_and_level_are_clear_errors() -> None:
    with pytest.raises(GeneratorError, match="no generator 'sokoban'; known: blocksworld"):
        expand("sokoban", None)
    with pytest.raises(GeneratorError, match="unknown difficulty insane"):
        expand("hanoi", "insane")


def test_unsolvable_instances_are_never_emitted_as_gold(tmp_path: Path) -> None:
    # no gluten-free portions: every task with an allergic child has no plan
    stats = _gen(tmp_path / "s", (("childsnack", "easy"),), count=3, overrides={"gluten_free": 0})
    assert stats[0].rejected["unsolvable"] > 0
    rows = _rows(tmp_path / "s")
    assert len(rows) == 3
    gold = get_generator("childsnack").domain_text()
    for r in rows:
        problem = (tmp_path / "s" / r["problem_file"]).read_text()
        assert "(allergic_gluten" not in problem
        plan = (tmp_path / "s" / r["plan_file"]).read_text()
        assert solvers.validate(gold, problem, plan).valid


def test_nothing_is_gold_when_the_planner_limit_is_too_short(tmp_path: Path) -> None:
    with pytest.raises(GeneratorError, match=r"only 0 distinct solvable tasks .*rejected \{'timeout'"):
        # 1 ms: a warm sandbox worker solved the smallest extreme depots draw within 20 ms once in a while
        _gen(tmp_path / "s", (("depots", "extreme"),), count=1, timeout_s=0.001)
    assert not (tmp_path / "s" / "index.parquet").exists()


def test_a_generated_set_loads_with_filters_and_its_gold_plans_pass_the_oracle(tmp_path: Path) -> None:
    _gen(tmp_path / "s", (("gripper", "easy"), ("gripper", "hard"), ("visitall", "easy")), count=2)
    tasks = load_tasks(f"gen:{tmp_path / 's'}")
    assert len(tasks) == 6 and {t.family for t in tasks} == {"generated"}
    assert [t.task_id.split("/")[2] for t in load_tasks(f"gen:{tmp_path / 's'}:level=hard")] == ["hard"] * 2
    assert len(load_tasks(f"gen:{tmp_path / 's'}:domain!=visitall")) == 4
    cut = load_tasks(f"gen:{tmp_path / 's'}:3")  # round-robin over (domain, level)
    assert len({t.task_id.rsplit("/", 1)[0] for t in cut}) == 3
    for t in tasks:
        assert t.description and t.gold_plan
        assert check_plan(t, t.gold_plan).correct is True
        assert check_plan(t, "").correct is False


@pytest.mark.parametrize(("spec", "message"), [
    ("gen:", "gen needs a directory"),
    ("gen:/nonexistent/set", "not a generated task set"),
    ("gen:{dir}:0", "positive integer"),
    ("gen:{dir}:colour=red", "unknown parameter 'colour'"),
])
def test_bad_gen_specs_are_clear_errors(tmp_path: Path, spec: str, message: str) -> None:
    _gen(tmp_path / "s", (("miconic", "easy"),), count=1)
    with pytest.raises(TaskSpecError, match=message):
        load_tasks(spec.format(dir=tmp_path / "s"))


FIXTURE = Path(__file__).with_name("fixtures") / "planbench_dir"


def test_a_planbench_data_directory_loads_and_its_plans_pass_the_oracle() -> None:
    tasks = load_tasks(f"planbench-dir:{FIXTURE}")
    assert [t.task_id for t in tasks] == ["planbench/blocksworld/instance-2", "planbench/blocksworld/instance-3"]
    assert load_tasks(f"planbench-dir:{FIXTURE}:blocksworld:1")[0].task_id.endswith("instance-2")
    for t in tasks:
        assert "[STATEMENT]" in t.description
        assert check_plan(t, t.gold_plan).correct is True
    with pytest.raises(TaskSpecError, match="not a directory"):
        load_tasks("planbench-dir:/nonexistent")
    with pytest.raises(TaskSpecError, match="unknown PlanBench domain"):
        load_tasks(f"planbench-dir:{FIXTURE}:sokoban")


@pytest.mark.parametrize("domain", ["satellite", "rovers"])
def test_a_temporal_generator_takes_its_gold_plan_from_the_temporal_planner(tmp_path: Path, domain: str) -> None:
    _gen(tmp_path / "s", ((domain, "easy"), (domain, "hard")), count=2)
    rows = _rows(tmp_path / "s")
    assert {(r["target_planner"], r["planner"]) for r in rows} == {("temporal", solvers.temporal_planner())}
    tasks = load_tasks(f"gen:{tmp_path / 's'}")
    assert len(tasks) == 4 and {t.target_planner for t in tasks} == {"temporal"}
    for t in tasks:
        assert re.match(r"\d+\.\d+: \(", t.gold_plan), t.gold_plan  # start times and durations
        assert solvers.validate(t.gold_domain, t.gold_problem, t.gold_plan).valid
        assert check_plan(t, t.gold_plan).correct is True


def test_statements_come_in_several_surface_forms() -> None:
    texts = [draft("logistics", "easy", 0, i, {}).description for i in range(30)]
    assert any("As initial conditions I have that" in t for t in texts)
    assert any(t.count("\n- ") > 2 for t in texts)
    assert any("I need to reach a state" in t for t in texts)
    assert len({t.split("\n\n")[0] for t in texts}) == 2  # both introductions


def test_ray_verification_gives_the_same_set_as_one_process(tmp_path: Path) -> None:
    import ray

    jobs = (("visitall", "easy"),)
    _gen(tmp_path / "local", jobs, count=4)
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        generate(GenerateRequest(jobs=jobs, count=4, seed=0, out=tmp_path / "ray", use_ray=True))
    finally:
        ray.shutdown()
    assert _rows(tmp_path / "ray") == _rows(tmp_path / "local")


def test_the_classical_preset_is_blocksworld_three_levels_and_hanoi_four() -> None:
    assert expand("classical", None) == (("blocksworld", "easy"), ("blocksworld", "medium"),
                                         ("blocksworld", "hard"), ("hanoi", "easy"), ("hanoi", "medium"),
                                         ("hanoi", "hard"), ("hanoi", "extreme"))


def test_visitall_draws_again_when_blocked_cells_wall_the_robot_in() -> None:
    # a 1x5 corridor with 40% blocked walls the robot in on many draws; each draft still succeeds
    for i in range(200):
        cand = draft("visitall", None, 0, i, {"width": 1, "height": 5, "blocked_pct": 40, "goal_pct": 100})
        assert cand.goal_atoms >= 1

"""The world file: the default one is today's world, a bad one is refused naming the key, another
one changes the results of `halo report`, the pipeline and a rollout job, which record its hash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cluster.cli import app
from rollout.sim.spec import SimSpecError, absolute_world_spec, parse_sim_spec
from rollout.sim.teacher_chat import PROFILES, SIM_TEACHER_PRICES, SimTeacherParams, make_sim_teacher_chat
from rollout.sim.world import SimConfig
from rollout.sim.world_file import (
    DEFAULT_WORLD_PATH,
    WorldFileError,
    default_world,
    load_world,
    parse_world,
)
from rollout.store import TrajectoryStore

runner = CliRunner()
HALO = str(Path(sys.executable).with_name("halo"))


def _doc() -> dict:
    return yaml.safe_load(DEFAULT_WORLD_PATH.read_text())


def _write(tmp_path: Path, doc: dict, name: str = "world.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_default_world_is_the_default_config_and_profiles(tmp_path: Path) -> None:
    world = default_world()
    assert SimConfig.from_world(world) == SimConfig()
    assert SimConfig().world_hash == world.hash and len(world.hash) == 16
    # the teachers' profiles and prices are the world file's
    for name, profile in PROFILES.items():
        assert {k: getattr(profile, k) for k in world.teachers[name]} == world.teachers[name]
    assert set(SIM_TEACHER_PRICES.models) == set(world.teacher_prices)
    # the hash is of the parameters: comments and key order do not change it, a value does
    assert load_world(_write(tmp_path, _doc())).hash == world.hash  # re-written: sorted keys, no comments
    changed = _doc()
    changed["world"]["side_effect_prob"] = 0.09
    assert parse_world(changed).hash != world.hash


def _set(doc: dict, path: str, value: object) -> dict:
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize("path, value, message", [
    ("world.repair_prob", 1.4, "world.repair_prob: must be a probability in [0, 1], got 1.4"),
    ("world.repair_prob", "high", "world.repair_prob: must be a number, got 'high'"),
    ("world.repair_prob", _DELETE, "world.repair_prob: missing"),
    ("world.repair_probability", 0.5, "world.repair_probability: unknown key"),
    ("world.fault_count_weights", [0, 0], "world.fault_count_weights: the weights must not all be 0"),
    ("world.fault_count_weights", [0.5, -1], "world.fault_count_weights[1]: must be in [0, inf]"),
    ("world.class_weights.wrong_gaol", 1.0, "world.class_weights.wrong_gaol: unknown key"),
    ("world.model", "gpt-9", "world.model: 'gpt-9' has no entry in world.prices"),
    ("world.prices.sim-frontier", [1.0], "world.prices.sim-frontier: must be [input, output]"),
    ("world.prompt_base_tokens", 1.5, "world.prompt_base_tokens: must be a whole number"),
    ("teachers.weaker.accuracy.wrong_goal", 2, "teachers.weaker.accuracy.wrong_goal: must be a probability"),
    ("teachers.weaker.accuracy.the_goal", 0.5, "teachers.weaker.accuracy.the_goal: unknown key"),
    ("teachers.weaker.confusion.wrong_goal", 40, "teachers.weaker.confusion.wrong_goal: must be an agent ID"),
    ("teachers.stronger.model", "claude", "teachers.stronger.model: 'claude' has no entry in teacher_prices"),
    ("teachers.weaker", _DELETE, "teachers.weaker: missing"),
    ("teacher_prices.gpt-5-mini.input", -1, "teacher_prices.gpt-5-mini.input: must be in [0, inf]"),
    ("version", 2, "version: 2 (this release reads version 1)"),
    ("extra", 1, "extra: unknown key"),
    ("paper_calibration", _DELETE, "paper_calibration: missing"),
    ("paper_calibration.teachers.weaker.prompt_tokens", -3,
     "paper_calibration.teachers.weaker.prompt_tokens: must be a whole number"),
    ("paper_calibration.served_policy.decisions_per_gpu_hour", 0,
     "paper_calibration.served_policy.decisions_per_gpu_hour: must be > 0"),
    ("paper_calibration.vanilla_success.domain.blocksworld", 1.5,
     "paper_calibration.vanilla_success.domain.blocksworld: must be a probability"),
    ("paper_calibration.vanilla_success.family.generated", _DELETE,
     "paper_calibration.vanilla_success.family.generated: missing"),
    ("paper_calibration.vanilla_model", "medium", "paper_calibration.vanilla_model: must be one of weaker, stronger"),
])
def test_a_bad_world_file_names_the_key(tmp_path: Path, path: str, value: object, message: str) -> None:
    bad = _write(tmp_path, _set(_doc(), path, value))
    with pytest.raises(WorldFileError) as err:
        load_world(bad)
    assert str(err.value).startswith(f"{bad}: ") and message in str(err.value)
    with pytest.raises(SimSpecError, match="sim:world"):
        parse_sim_spec(f"sim:world={bad}")
    result = runner.invoke(app, ["report", "--tasks", "planbench:blocksworld:2", "--llm", f"sim:world={bad}"])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_unreadable_world_files(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("world: [unclosed\n")
    for path, message in ((tmp_path / "none.yaml", "no such world file"), (tmp_path / "broken.yaml", "not valid YAML")):
        with pytest.raises(WorldFileError, match=message):
            load_world(path)


def test_spec_world_then_run_settings(tmp_path: Path) -> None:
    path = _write(tmp_path, _set(_doc(), "world.latency_median_ms", 900.0))
    options = parse_sim_spec(f"sim:realtime=1,world={path}")
    assert options.config.latency_median_ms == 900.0 and options.config.latency_scale == 1.0
    options = parse_sim_spec(f"sim:world={path},latency_ms=100")
    assert options.config.latency_median_ms == 100.0
    assert absolute_world_spec("sim:world=w.yaml,realtime=1") == f"sim:world={Path('w.yaml').resolve()},realtime=1"
    assert absolute_world_spec("openai:m") == "openai:m"


def test_dump_prints_the_default_world_and_check_prints_the_hash(tmp_path: Path) -> None:
    dumped = runner.invoke(app, ["sim", "world", "--dump"])
    assert dumped.exit_code == 0 and dumped.output == DEFAULT_WORLD_PATH.read_text()
    copy = tmp_path / "copy.yaml"
    copy.write_text(dumped.output)
    checked = runner.invoke(app, ["sim", "world", "--check", str(copy)])
    assert checked.exit_code == 0 and f"hash {SimConfig().world_hash}" in checked.output
    assert runner.invoke(app, ["sim", "world"]).exit_code == 2


def _teacher_world(tmp_path: Path) -> Path:
    """The default world with one rate changed: primary repairers fix a fault half as often."""
    return _write(tmp_path, _set(_doc(), "world.repair_prob", 0.4), "slow-repairs.yaml")


def test_halo_report_in_another_world_gives_other_results(tmp_path: Path) -> None:
    changed = _teacher_world(tmp_path)
    tables = {}
    for llm in ("sim", f"sim:world={changed}"):
        result = runner.invoke(app, ["report", "--tasks", "planbench:blocksworld:8", "--policy",
                                     "rules+scripted", "--episodes", "2", "--markdown", "--llm", llm])
        assert result.exit_code == 0, result.output
        tables[llm] = result.output
    assert f"world default {SimConfig().world_hash}" in tables["sim"]
    other = SimConfig.from_world(load_world(changed)).world_hash
    assert other != SimConfig().world_hash and f"world default {other}" in tables[f"sim:world={changed}"]
    rows = {k: [line for line in v.splitlines() if line.startswith("| rules+scripted")] for k, v in tables.items()}
    assert rows["sim"] != rows[f"sim:world={changed}"]


def test_the_teacher_answers_from_the_world_it_runs_in(tmp_path: Path) -> None:
    import asyncio

    from rollout.loop.episode import EpisodeConfig, run_episodes
    from rollout.policies import make_policy
    from rollout.tasks import load_tasks

    doc = _doc()
    for cls in doc["teachers"]["weaker"]["accuracy"]:
        doc["teachers"]["weaker"]["accuracy"][cls] = 0.0  # always wrong
    doc["teachers"]["weaker"]["unparsable"] = 0.0
    world = SimConfig.from_world(parse_world(doc), latency_scale=0.0)
    tasks = load_tasks("planbench:blocksworld:6")
    success = {}
    for label, sim in (("default", SimConfig(latency_scale=0.0)), ("always wrong", world)):
        recs = asyncio.run(run_episodes(tasks, make_policy("teacher:model=sim", seed=0),
                                        EpisodeConfig(seed=3, run_id="w", sim=sim), concurrency=6))
        success[label] = sum(r.success_validator for r in recs)
    assert success["always wrong"] < success["default"]
    assert make_sim_teacher_chat(SimTeacherParams()).overrides == {}


def test_pipeline_in_another_world_records_its_hash(tmp_path: Path) -> None:
    from train.pipeline import PipelineConfig, PipelineError, run_pipeline

    changed = _teacher_world(tmp_path)
    stages = {}
    for llm in ("sim", f"sim:world={changed}"):
        cfg = PipelineConfig(out=str(tmp_path / ("a" if llm == "sim" else "b")), tasks="planbench:all:2",
                             train_seeds=1, eval_seeds=1, ablations=False, cross_domain=False, concurrency=8, llm=llm,
                             exit_iterations=0, table2_min_pairs=0)
        result = run_pipeline(cfg, log=lambda _: None)
        stages[llm] = result.stages
        pipeline_json = (Path(cfg.out) / "pipeline.json").read_text()
        assert result.stages["simulated world"]["hash"] in pipeline_json
    default, other = stages["sim"], stages[f"sim:world={changed}"]
    assert default["simulated world"]["hash"] == SimConfig().world_hash
    assert other["simulated world"]["hash"] == SimConfig.from_world(load_world(changed)).world_hash
    assert default["teacher episodes"] != other["teacher episodes"]
    with pytest.raises(PipelineError, match="no such world file"):
        run_pipeline(PipelineConfig(out=str(tmp_path / "c"), llm="sim:world=/nowhere.yaml"), log=lambda _: None)


def test_rollout_job_records_the_world_hash(tmp_path: Path) -> None:
    changed = _teacher_world(tmp_path)
    store_dir = tmp_path / "store"
    cmd = [HALO, "rollout", "--store", str(store_dir), "--tasks", "planbench:blocksworld:4", "--episodes", "8",
           "--run-id", "w", "--no-progress", "--llm", f"sim:world={changed.name}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "RAY_DEDUP_LOGS": "0"})
    assert done.returncode == 0, done.stdout + done.stderr
    meta = TrajectoryStore(store_dir).read_run_meta("w")
    expected = SimConfig.from_world(load_world(changed)).world_hash
    assert meta.config["sim_world"] == {"name": "default", "hash": expected}
    assert meta.config["llm"] == f"sim:world={changed}"  # made absolute for the workers
    shown = subprocess.run([HALO, "runs", "show", "w", "--store", str(store_dir)], capture_output=True, text=True,
                           timeout=120)
    assert expected in shown.stdout, shown.stdout + shown.stderr


def test_a_family_of_worlds_is_reproducible_and_inside_its_ranges() -> None:
    from rollout.sim.world_family import draw_worlds, right_agent, to_yaml

    base = default_world()
    worlds = draw_worlds(4, seed=1)
    assert [w.hash for w in worlds] == [w.hash for w in draw_worlds(4, seed=1)]
    assert len({w.hash for w in worlds} | {base.hash}) == 5
    assert draw_worlds(1, seed=2)[0].hash != worlds[0].hash
    for w in worlds:
        assert parse_world(yaml.safe_load(to_yaml(w))).hash == w.hash  # written and read back unchanged
        for key in ("repair_prob", "secondary_repair_prob", "dynamic_repair_prob"):
            assert abs(w.sim[key] - base.sim[key]) <= 0.15 + 1e-9
        for k, weight in w.sim["class_weights"].items():
            assert 0.5 - 1e-6 <= weight / base.sim["class_weights"][k] <= 2 + 1e-6
        for name, teacher in w.teachers.items():
            for cls, p in teacher["accuracy"].items():
                assert abs(p - base.teachers[name]["accuracy"][cls]) <= 0.15 + 1e-9
            assert all(agent != right_agent(cls) for cls, agent in teacher["confusion"].items())
        assert w.sim["latency_median_ms"] == base.sim["latency_median_ms"]  # outside the ranges: unchanged
    with pytest.raises(ValueError, match="at least 1"):
        draw_worlds(0, seed=1)


def test_halo_sim_world_writes_a_family(tmp_path: Path) -> None:
    from rollout.sim.world_family import draw_worlds

    result = runner.invoke(app, ["sim", "world", "--worlds", "2", "--world-seed", "3", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for world in draw_worlds(2, seed=3):
        assert load_world(tmp_path / f"{world.name}.yaml").hash == world.hash and world.hash in result.output
    assert runner.invoke(app, ["sim", "world", "--worlds", "2"]).exit_code == 2

"""`halo tasks` and the report's split by domain and level, through the real CLI app."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cluster.cli import app

runner = CliRunner()


def test_tasks_list_names_every_generator_with_knobs_and_levels() -> None:
    result = runner.invoke(app, ["tasks", "list"])
    assert result.exit_code == 0, result.output
    for name in ("blocksworld", "logistics", "depots", "hanoi", "gripper", "miconic", "visitall", "childsnack",
                 "satellite", "rovers", "floortile"):
        assert name in result.output
    assert "blocks (2..40)" in result.output and "extreme" in result.output and "preset classical" in result.output


def test_generate_show_and_report_by_domain_and_level(tmp_path: Path) -> None:
    out = tmp_path / "set"
    result = runner.invoke(app, ["tasks", "generate", "hanoi,miconic", "--difficulty", "easy,hard", "--count", "2",
                                 "--out", str(out), "--ray", "off"])
    assert result.exit_code == 0, result.output
    assert "8 gold tasks" in result.output and f"gen:{out}" in result.output
    shown = runner.invoke(app, ["tasks", "show", str(out)])
    assert shown.exit_code == 0 and "8 gold tasks" in shown.output and "miconic" in shown.output
    report = runner.invoke(app, ["report", "--tasks", f"gen:{out}", "--policy", "rules+scripted",
                                 "--by", "domain,level", "--markdown"])
    assert report.exit_code == 0, report.output
    lines = [ln for ln in report.output.splitlines() if ln.startswith("| hanoi") or ln.startswith("| miconic")]
    assert [ln.split("|")[2].strip() for ln in lines] == ["easy", "hard", "easy", "hard"]
    assert "SIMULATED" in report.output


def test_bad_generate_arguments_exit_2_without_a_traceback(tmp_path: Path) -> None:
    cases = [
        (["blocksworld", "--size", "blocks=0"], "out of range"),
        (["blocksworld", "--difficulty", "insane"], "unknown difficulty"),
        (["sokoban"], "no generator 'sokoban'"),
        (["classical", "--difficulty", "easy"], "preset 'classical' fixes its own levels"),
        (["blocksworld", "--count", "0"], "--count must be at least 1"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["tasks", "generate", *args, "--out", str(tmp_path / "x"), "--ray", "off"])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["tasks", "show", str(tmp_path)])
    assert result.exit_code == 2 and "not a generated task set" in result.output
    result = runner.invoke(app, ["report", "--tasks", "planbench:blocksworld:1", "--by", "colour"])
    assert result.exit_code == 2 and "cannot group by colour" in result.output


def test_runs_show_splits_a_stored_run_by_domain_and_level(tmp_path: Path) -> None:
    import asyncio

    from rollout.loop.episode import EpisodeConfig, run_episodes
    from rollout.policies import make_policy
    from rollout.store import TrajectoryStore
    from rollout.tasks import load_tasks
    from rollout.tasks.generators.pipeline import GenerateRequest, generate

    generate(GenerateRequest(jobs=(("gripper", "easy"), ("gripper", "extreme")), count=2, seed=0,
                             out=tmp_path / "set", use_ray=False))
    records = asyncio.run(run_episodes(load_tasks(f"gen:{tmp_path / 'set'}"), make_policy("rules+scripted", seed=0),
                                       EpisodeConfig(seed=0, llm_backend="sim", run_id="genrun"), concurrency=4))
    TrajectoryStore(tmp_path / "store").write_episodes("genrun", records)
    result = runner.invoke(app, ["runs", "show", "genrun", "--store", str(tmp_path / "store"), "--by", "domain,level"])
    assert result.exit_code == 0, result.output
    rows = [ln for ln in result.output.splitlines() if "gripper" in ln]
    assert len(rows) == 2 and "easy" in rows[0] and "extreme" in rows[1]
    assert "SIMULATED" in result.output
    report = runner.invoke(app, ["report", "--run", "genrun", "--store", str(tmp_path / "store"), "--by", "level"])
    assert report.exit_code == 0, report.output
    levels = [next((w for w in ("easy", "extreme") if w in ln.split()), None)
              for ln in report.output.splitlines() if "rules+scripted" in ln]
    assert [lv for lv in levels if lv] == ["easy", "extreme"], report.output
    table = runner.invoke(app, ["report", "--run", "genrun", "--store", str(tmp_path / "store"), "--by", "domain,level",
                                "--markdown"])
    assert [ln.split("|")[2].strip() for ln in table.output.splitlines() if ln.startswith("| gripper")] == \
        ["easy", "extreme"]
    missing = runner.invoke(app, ["report", "--run", "nope", "--store", str(tmp_path / "store")])
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output and "Traceback" not in missing.output

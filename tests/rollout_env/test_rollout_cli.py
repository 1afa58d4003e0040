"""`halo episode` and `halo report` through the real CLI app."""

from __future__ import annotations

from typer.testing import CliRunner

from cluster.cli import app

runner = CliRunner()


def test_halo_episode_prints_a_trace() -> None:
    result = runner.invoke(app, ["episode", "--task", "planbench/blocksworld/instance-3", "--tasks",
                                 "planbench:blocksworld:5", "--policy", "rules+scripted", "--seed", "2"])
    assert result.exit_code in (0, 1), result.output
    out = result.output
    assert "llm_backend=sim" in out and "task planbench/blocksworld/instance-3" in out
    assert "[ 0]" in out and " by " in out and "validator success:" in out and "oracle success:" in out


def test_halo_episode_bad_input() -> None:
    result = runner.invoke(app, ["episode", "--task", "nope", "--tasks", "planbench:blocksworld:2"])
    assert result.exit_code == 2 and "no task" in result.output
    result = runner.invoke(app, ["episode", "--task", "planbench/blocksworld/instance-2", "--tasks",
                                 "planbench:blocksworld:2", "--policy", "wat"])
    assert result.exit_code == 2 and "unknown policy" in result.output
    result = runner.invoke(app, ["episode", "--task", "x", "--llm", "gpt"])
    assert result.exit_code == 2


def test_halo_report_table() -> None:
    result = runner.invoke(app, ["report", "--tasks", "planbench:blocksworld:4", "--policy", "random,rules+scripted",
                                 "--seed", "1", "--markdown"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "SIMULATED" in out and "llm_backend=sim" in out
    assert "| oracle success | validator success | avg steps | LLM calls/episode | cost/task |" in out
    rows = [line for line in out.splitlines() if line.startswith("| random") or line.startswith("| rules+scripted")]
    assert len(rows) == 2 and all("| sim | 4 |" in r for r in rows)

"""`halo train --rl` end to end on a few simulated tasks (real episodes, real planners and
validator): a run killed mid-way resumes from its last complete iteration, the artifact is one the
policy registry loads (`model:DIR`), the curves are a PNG, and bad input is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rl_start import fit_rl_start
from typer.testing import CliRunner

from cluster.cli import app

runner = CliRunner()
HALO = str(Path(sys.executable).with_name("halo"))
TASKS = "planbench:blocksworld:3"
RL_ARGS = ["--tasks", TASKS, "--tasks-per-iter", "2", "--group", "2", "--concurrency", "2", "--seed", "7"]


@pytest.fixture(scope="module")
def start_dir(tmp_path_factory) -> Path:
    """A supervised fast policy fitted on rules+scripted episodes (the RL start)."""
    return fit_rl_start(tmp_path_factory.mktemp("rl") / "start", TASKS, "rl-test-teacher")


def _checkpoints(out: Path) -> list[int]:
    return sorted(int(p.stem.split("-")[1]) for p in (out / "rl_checkpoints").glob("iter-*.json"))


def test_killed_run_resumes_and_the_artifact_loads_as_a_policy(start_dir, tmp_path):
    out = tmp_path / "rl"
    proc = subprocess.Popen([HALO, "train", "--rl", "--init-from", str(start_dir), "--out", str(out),
                             "--iterations", "50", *RL_ARGS], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ}, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None and not _checkpoints(out):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # no clean shutdown: the checkpoint on disk is all there is
    proc.wait()
    done = _checkpoints(out)
    assert done, proc.stdout.read() if proc.stdout else ""
    history = json.loads((out / "rl_checkpoints" / f"iter-{done[-1]:05d}.json").read_text())["history"]

    result = runner.invoke(app, ["train", "--rl", "--init-from", str(start_dir), "--out", str(out),
                                 "--iterations", str(done[-1] + 1), *RL_ARGS])
    assert result.exit_code == 0, result.output
    assert f"resuming after iteration {done[-1]}" in result.output
    final = json.loads((out / "rl_history.json").read_text())
    assert len(final) == done[-1] + 1 and final[: len(history)] == history  # continued, not restarted
    assert (out / "rl_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    from rollout.loop.episode import EpisodeConfig, run_episode_sync
    from rollout.policies import make_policy
    from rollout.sim.spec import sim_config_for
    from rollout.tasks import load_tasks
    from train.fast_policy import HashedLinearPolicy
    from train.policies import load_policy

    assert isinstance(load_policy(out), HashedLinearPolicy)
    policy = make_policy(f"model:{out}")
    record = run_episode_sync(load_tasks(TASKS)[0], policy, EpisodeConfig(seed=3, sim=sim_config_for("sim:scale=0")))
    assert not record.error and not record.infra_error
    assert record.steps and all(s.decided_by == "model" for s in record.steps)


def test_rl_refuses_bad_input_in_one_line(start_dir, tmp_path):
    result = runner.invoke(app, ["train", "--rl", "--out", str(tmp_path / "x"), "--tasks", TASKS])
    assert result.exit_code == 2 and "--init-from" in result.output
    result = runner.invoke(app, ["train", "--rl", "--init-from", str(start_dir), "--out", str(tmp_path / "x"),
                                 "--tasks", TASKS, "--group", "1"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --group must be at least 2 (the baseline is the group's mean)"
    result = runner.invoke(app, ["train", "--rl", "--init-from", str(start_dir), "--out", str(tmp_path / "x"),
                                 "--tasks", TASKS, "--advantage", "exit", "--exit-calls", "0"])
    assert result.exit_code == 2 and result.output.strip() == "error: --exit-calls must be at least 1"
    result = runner.invoke(app, ["train", "--rl", "--init-from", str(tmp_path / "none"), "--out", str(tmp_path / "x"),
                                 "--tasks", TASKS])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


@pytest.mark.parametrize("advantage", ["group", "fork", "exit"])
def test_a_resumed_run_ends_where_an_uninterrupted_one_does(start_dir, tmp_path, advantage):
    """Checkpoints keep float64 weights and every draw is seeded by (seed, iteration, task, k),
    so stopping after iteration 1 and resuming gives the uninterrupted run's weights exactly (in
    fork mode too: the states forked are drawn by seed, the branches replay their snapshot's streams;
    in exit mode the resumed run refits on the pool its first iteration wrote)."""
    import numpy as np

    from train.rl_loop import RLSettings, run_rl

    settings = RLSettings(tasks=TASKS, iterations=2, tasks_per_iter=2, group=2, concurrency=2, seed=7,
                          advantage=advantage)
    run_rl(settings, start_dir, tmp_path / "whole", log=lambda _: None)
    run_rl(RLSettings(**{**settings.__dict__, "iterations": 1}), start_dir, tmp_path / "split", log=lambda _: None)
    lines: list[str] = []
    run_rl(settings, start_dir, tmp_path / "split", log=lines.append)
    assert lines[0].startswith("resuming after iteration 1")
    with np.load(tmp_path / "whole" / "weights.npz") as a, np.load(tmp_path / "split" / "weights.npz") as b:
        assert a["buckets"].tolist() == b["buckets"].tolist()
        np.testing.assert_array_equal(a["weights"], b["weights"])
        np.testing.assert_array_equal(a["bias"], b["bias"])
    history = json.loads((tmp_path / "whole" / "rl_history.json").read_text())
    assert history[-1]["distance_to_start"] > 0  # the runs did move the policy: equal is not trivially equal


def test_fork_advantage_reaches_the_cli_and_its_checkpoints_refuse_a_changed_option(start_dir, tmp_path):
    out = tmp_path / "fork"
    fork_args = ["--tasks", TASKS, "--tasks-per-iter", "2", "--group", "1", "--concurrency", "2", "--seed", "7",
                 "--advantage", "fork", "--fork-k", "2", "--fork-states", "1"]
    result = runner.invoke(app, ["train", "--rl", "--init-from", str(start_dir), "--out", str(out),
                                 "--iterations", "1", *fork_args])
    assert result.exit_code == 0, result.output
    history = json.loads((out / "rl_history.json").read_text())
    assert history[0]["fork_states"] >= 1 and history[0]["fork_branches"] >= 2
    meta = json.loads((out / "rl_checkpoints" / "iter-00001.json").read_text())
    assert {k: meta["settings"][k] for k in ("advantage", "fork_k", "fork_states")} == {
        "advantage": "fork", "fork_k": 2, "fork_states": 1}
    changed = [a if a != "2" or fork_args[i - 1] != "--fork-k" else "3" for i, a in enumerate(fork_args)]
    result = runner.invoke(app, ["train", "--rl", "--init-from", str(start_dir), "--out", str(out),
                                 "--iterations", "2", *changed])
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: {out}: its checkpoints were made with other settings (fork_k); "
                                     "use another --out, or the same settings to resume")
    for bad, message in ((["--advantage", "vine"], "error: --advantage 'vine': one of group, fork"),
                         (["--advantage", "fork", "--clip", "0.2"], "error: --advantage fork takes one plain step"),
                         (["--advantage", "exit", "--rl-epochs", "2"], "error: --advantage exit refits the policy")):
        result = runner.invoke(app, ["train", "--rl", "--init-from", str(start_dir), "--out", str(tmp_path / "x"),
                                     "--tasks", TASKS, *bad])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        assert result.output.startswith(message)

"""`halo rollout` end to end in a subprocess: Ctrl-C stops cleanly, the same command resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import typer

import cluster.ray_cluster as ray_cluster
from cluster.commands.rollout import run_job
from rollout.store import TrajectoryStore

HALO = str(Path(sys.executable).with_name("halo"))


def test_ctrl_c_keeps_committed_episodes_and_rerun_resumes(tmp_path):
    store_dir = tmp_path / "store"
    # The job must still be running when the first commit shows up. A count of episodes alone was
    # not enough (400 finished in 16 s, while the signal was on its way): the simulated calls sleep
    # 200 ms at 8 in flight job-wide, so 400 episodes take tens of seconds on any machine.
    cmd = [HALO, "rollout", "--store", str(store_dir), "--tasks", "planbench:blocksworld:10", "--episodes", "400",
           "--llm", "sim:realtime=1,latency_ms=200", "--llm-concurrency", "8", "--run-id", "ctrl-c", "--no-progress"]
    env = {**os.environ, "RAY_DEDUP_LOGS": "0"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    store = TrajectoryStore(store_dir)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not store.episode_ids("ctrl-c"):
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[0]
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out
    assert "interrupted" in out
    meta = store.read_run_meta("ctrl-c")
    assert meta.status == "interrupted"
    kept = store.episode_ids("ctrl-c")
    assert 0 < len(kept) < 400
    assert meta.episodes_committed == len(kept)

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"({len(kept)} already there)" in rerun.stderr
    assert "SIMULATED" in rerun.stdout
    rows = store.read_table(["ctrl-c"], columns=["episode_id", "step"]).to_pylist()
    assert len(rows) == len({(r["episode_id"], r["step"]) for r in rows})
    assert len({r["episode_id"] for r in rows}) == 400
    assert store.read_run_meta("ctrl-c").status == "completed"
    listing = subprocess.run([HALO, "runs", "--store", str(store_dir)], capture_output=True, text=True, timeout=60)
    assert "ctrl-c" in listing.stdout and "completed" in listing.stdout and "400/400" in listing.stdout


def test_ctrl_c_while_ray_goes_down_after_the_job_ended_keeps_the_jobs_own_answer(monkeypatch):
    """The run was closed as completed; a Ctrl-C that lands during Ray's shutdown must not turn it
    into "interrupted before any episode ran" with exit 130."""
    def interrupted_shutdown(handle: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ray_cluster, "start_or_join", lambda address, dashboard: object())
    monkeypatch.setattr(ray_cluster, "shutdown", interrupted_shutdown)
    summary = types.SimpleNamespace(status="completed")
    job = types.SimpleNamespace(run_id="late", specs=[1], tasks=[1], store=types.SimpleNamespace(url="mem://"),
                                run=lambda: summary)
    assert run_job(job, None, dashboard=False) is summary

    def interrupted_run() -> None:
        raise KeyboardInterrupt

    job.run = interrupted_run
    with pytest.raises(typer.Exit) as info:  # before the job had an answer: interrupted, as before
        run_job(job, None, dashboard=False)
    assert info.value.exit_code == 130

"""`halo rollout` end to end in a subprocess: Ctrl-C stops cleanly, the same command resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rollout.store import TrajectoryStore

HALO = str(Path(sys.executable).with_name("halo"))


def test_ctrl_c_keeps_committed_episodes_and_rerun_resumes(tmp_path):
    store_dir = tmp_path / "store"
    # Enough episodes that the job is still running when the first commit shows up (about 20/s here).
    cmd = [HALO, "rollout", "--store", str(store_dir), "--tasks", "planbench:blocksworld:10", "--episodes", "200",
           "--run-id", "ctrl-c", "--no-progress"]
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
    assert 0 < len(kept) < 200
    assert meta.episodes_committed == len(kept)

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"({len(kept)} already there)" in rerun.stderr
    assert "SIMULATED" in rerun.stdout
    rows = store.read_table(["ctrl-c"], columns=["episode_id", "step"]).to_pylist()
    assert len(rows) == len({(r["episode_id"], r["step"]) for r in rows})
    assert len({r["episode_id"] for r in rows}) == 200
    assert store.read_run_meta("ctrl-c").status == "completed"
    listing = subprocess.run([HALO, "runs", "--store", str(store_dir)], capture_output=True, text=True, timeout=60)
    assert "ctrl-c" in listing.stdout and "completed" in listing.stdout and "200/200" in listing.stdout

"""A run's life cycle from the command line: SIGTERM like Ctrl-C, `--episodes` below what is
stored, stale `running` runs, `halo runs stop` and `delete`, a second writer, `--dry-run`, `--json`
and tables that fit an 80-column terminal."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from cluster.errors import EXIT_BUSY, EXIT_INTERRUPTED
from rollout.store import RunMeta, TrajectoryStore
from rollout.store.lease import run_lease_path
from tests.trajectories import make_episodes

HALO = str(Path(sys.executable).with_name("halo"))
ENV = {**os.environ, "RAY_DEDUP_LOGS": "0"}


def halo(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([HALO, *args], capture_output=True, text=True, env=env or ENV, timeout=timeout)


def start_job(store: Path, run_id: str, episodes: int = 400) -> subprocess.Popen:
    cmd = [HALO, "rollout", "--store", str(store), "--tasks", "planbench:blocksworld:10", "--episodes",
           str(episodes), "--run-id", run_id, "--no-progress", "--replicas", "1"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
                            start_new_session=True)


def wait_for_commits(proc: subprocess.Popen, store: TrajectoryStore, run_id: str) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and not store.episode_ids(run_id):
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[0]


def test_sigterm_is_handled_like_ctrl_c_and_fewer_episodes_record_nothing(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    proc = start_job(tmp_path, "term")
    try:
        wait_for_commits(proc, store, "term")
        second = halo("rollout", "--store", str(tmp_path), "--tasks", "planbench:blocksworld:10", "--episodes",
                      "400", "--run-id", "term", "--no-progress")
        busy_delete = halo("runs", "delete", "term", "--yes", "--store", str(tmp_path))
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert second.returncode == EXIT_BUSY and "being written by another process" in second.stderr, second.stderr
    assert busy_delete.returncode == EXIT_BUSY, busy_delete.stderr
    assert proc.returncode == EXIT_INTERRUPTED, out
    assert "Ctrl-C or SIGTERM" in out and "Traceback" not in out
    meta = store.read_run_meta("term")
    kept = store.episode_ids("term")
    assert meta.status == "interrupted" and 0 < len(kept) < 400 and meta.episodes_committed == len(kept)

    fewer = halo("rollout", "--store", str(tmp_path), "--tasks", "planbench:blocksworld:10", "--episodes", "1",
                 "--run-id", "term", "--no-progress")
    assert fewer.returncode == 0 and "asks for fewer: nothing was run or recorded" in fewer.stderr, fewer.stderr
    after = store.read_run_meta("term")
    assert (after.episodes_requested, after.status, after.updated_at) == (400, "interrupted", meta.updated_at)
    listing = json.loads(halo("runs", "--json", "--store", str(tmp_path)).stdout)
    assert listing == [{**listing[0], "run_id": "term", "status": "interrupted", "requested": 400,
                        "committed": len(kept)}]

    deleted = halo("runs", "delete", "term", "--yes", "--store", str(tmp_path))
    assert deleted.returncode == 0 and f"{len(kept)} episodes" in deleted.stdout
    assert json.loads(halo("runs", "--json", "--store", str(tmp_path)).stdout) == []
    assert store.episode_ids("term") == set() and not list((tmp_path / "steps" / "run_id=term").glob("*.parquet"))


def test_runs_stop_ends_a_running_job_as_interrupted(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    proc = start_job(tmp_path, "stopme")
    try:
        wait_for_commits(proc, store, "stopme")
        stopped = halo("runs", "stop", "stopme", "--store", str(tmp_path), "--wait", "60")
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert stopped.returncode == 0 and "stopped (status interrupted)" in stopped.stdout, stopped.stdout
    assert proc.returncode == EXIT_INTERRUPTED and "halo runs stop" in out, out
    assert store.read_run_meta("stopme").status == "interrupted"


def _dead_owner() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:{uuid.uuid4().hex[:8]}"


def test_stale_running_runs_are_marked_interrupted(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    for run_id in ("no-lease", "dead-writer"):
        store.write_episodes(run_id, make_episodes(run_id, 2))
        store.write_run_meta(RunMeta(run_id, status="running", episodes_requested=5))
    store.put_bytes(run_lease_path("dead-writer"),
                    json.dumps({"owner": _dead_owner(), "at": time.time(), "ttl_s": 600}).encode())
    listing = {r["run_id"]: r for r in json.loads(halo("runs", "--json", "--store", str(tmp_path)).stdout)}
    assert {r["status"] for r in listing.values()} == {"interrupted"}
    assert all((r["requested"], r["committed"]) == (5, 2) for r in listing.values())
    assert store.read_run_meta("no-lease").status == "interrupted"
    assert "re-run the same command" in store.read_run_meta("dead-writer").message
    stop = halo("runs", "stop", "no-lease", "--store", str(tmp_path))
    assert stop.returncode == 0 and "is not running (status interrupted)" in stop.stdout


def test_duplicate_episodes_are_reported(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    episodes = make_episodes("dup", 3)
    store.write_episodes("dup", episodes)
    from rollout.store.steps_table import episodes_to_arrow

    store.steps._commit(episodes_to_arrow(episodes[:1]), "dup", 1)  # what two unleased writers once did
    shown = halo("runs", "show", "dup", "--store", str(tmp_path))
    assert "WARNING: 1 episode(s) are stored more than once" in shown.stdout, shown.stdout
    as_json = json.loads(halo("runs", "show", "dup", "--json", "--store", str(tmp_path)).stdout)
    assert as_json["duplicate_episodes"] == 1 and as_json["committed"] == 3


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_tables_fit_an_80_column_terminal(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    run_id = "rules-scripted-noise-0-3-seed-7-0123456789"
    store.write_episodes(run_id, make_episodes(run_id, 4))
    store.write_run_meta(RunMeta(run_id, status="completed", episodes_requested=4, llm_backend="sim",
                                 policy="rules+scripted:noise=0.3,seed=7"))
    env = {**ENV, "COLUMNS": "80", "FORCE_COLOR": "1"}
    for args in (("runs",), ("runs", "show", run_id), ("runs", "show", run_id, "--by", "domain")):
        out = halo(*args, "--store", str(tmp_path), env=env).stdout
        lines = _ANSI.sub("", out).splitlines()
        assert lines and max(len(line) for line in lines) <= 80, out
        assert "…" not in out and run_id in out
    wide = _ANSI.sub("", halo("runs", "--wide", "--store", str(tmp_path), env=env).stdout)
    assert "validator success" in wide and "…" not in wide


def test_dry_run_plans_without_ray_or_writing(tmp_path: Path) -> None:
    t0 = time.monotonic()
    out = halo("rollout", "--dry-run", "--json", "--store", str(tmp_path), "--episodes", "12")
    plan = json.loads(out.stdout)
    assert out.returncode == 0 and plan["requested"] == 12 and plan["to_run"] == 12 and len(plan["domains"]) >= 3
    assert "estimate" in plan and time.monotonic() - t0 < 60
    assert not (tmp_path / "runs").exists()

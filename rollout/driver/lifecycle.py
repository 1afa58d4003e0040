"""A run's life cycle outside its job: stale `running` runs, stop requests, deletion.

A run is written under its lease (rollout/store/lease.py). A run recorded as `running` whose lease
is not live lost its writer (killed, the machine gone): it is `interrupted`, and re-running the
same command resumes it. `halo runs stop` asks the writer to stop (a request object the job
reads every 2 s, so it works across machines); `halo runs delete` refuses a run with a live writer.
"""

from __future__ import annotations

import contextlib
import json
import time

import pyarrow.fs as pafs

from rollout.store import RunMeta, StoreUnavailable, TrajectoryStore, check_run_id
from rollout.store.lease import Lease, LeaseHeld, LeaseInfo, run_lease_path, run_stop_path
from rollout.store.trajectory_store import RUNS_DIR

STALE_MESSAGE = ("its writer stopped without closing the run (killed, or its machine went away); "
                 "re-run the same command to resume")


def run_lease(store: TrajectoryStore, run_id: str) -> Lease:
    return Lease(store, run_lease_path(run_id), what=f"run {run_id}")


def live_writer(store: TrajectoryStore, run_id: str) -> LeaseInfo | None:
    held = run_lease(store, run_id).read()
    return held if held is not None and held.live() else None


def mark_if_stale(store: TrajectoryStore, meta: RunMeta) -> bool:
    """A `running` run without a live lease becomes `interrupted` (in the store too); True if it did."""
    if meta.status != "running" or live_writer(store, meta.run_id) is not None:
        return False
    meta.status, meta.message = "interrupted", STALE_MESSAGE
    with contextlib.suppress(StoreUnavailable):  # the listing stays right even if the write fails
        store.write_run_meta(meta)
    return True


def request_stop(store: TrajectoryStore, run_id: str, *, wait_s: float = 30.0) -> str:
    """Ask the run's writer to stop; wait until it closed the run. Returns what happened (one line)."""
    meta = store.read_run_meta(check_run_id(run_id))
    if meta is None:
        raise ValueError(f"no run {run_id!r} in {store.url}")
    if live_writer(store, run_id) is None:
        if mark_if_stale(store, meta):
            return f"run {run_id} had no live writer: marked interrupted"
        return f"run {run_id} is not running (status {meta.status})"
    store.put_bytes(run_stop_path(run_id), json.dumps({"at": time.time()}).encode())
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(0.5)
        meta = store.read_run_meta(run_id) or meta
        if meta.status != "running" and live_writer(store, run_id) is None:
            return f"run {run_id} stopped (status {meta.status}); re-run its command to resume"
    return f"asked run {run_id} to stop; its writer has not closed it within {wait_s:.0f}s (it will at its next check)"


def delete_run(store: TrajectoryStore, run_id: str) -> int:
    """Delete a run's rows, files, metadata and lease; refused (LeaseHeld) while a writer holds it.
    Returns the number of episodes removed."""
    check_run_id(run_id)
    held = live_writer(store, run_id)
    if held is not None:
        raise LeaseHeld(f"run {run_id} is being written ({held.describe()}); `halo runs stop {run_id}` first")
    episodes = len(store.episode_ids(run_id))
    store.steps.delete_run(run_id)
    store.remove_orphans(run_id)
    fs = store.filesystem
    for relative in (f"{RUNS_DIR}/{run_id}.json", run_lease_path(run_id), run_stop_path(run_id)):
        path = store.fs_path(relative)
        if fs.get_file_info(path).type == pafs.FileType.File:
            fs.delete_file(path)
    return episodes

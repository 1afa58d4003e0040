"""The store lease (rollout/store/lease.py): one live writer, expiry when the holder dies or stops
renewing, write-then-confirm against a racing writer, and orphan cleanup bounded by the heartbeat."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from rollout.store import TrajectoryStore
from rollout.store.lease import Lease, LeaseHeld, run_lease_path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_second_writer_refused_until_release(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    first, second = (Lease(store, run_lease_path("r1"), what="run r1") for _ in range(2))
    first.acquire()
    with pytest.raises(LeaseHeld, match="run r1 is being written by another process"):
        second.acquire()
    first.release()
    assert second.acquire() is not None  # the released lease is what it found


def test_lease_of_a_dead_local_process_expires_at_once(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    owner = f"{socket.gethostname()}:{_dead_pid()}:{uuid.uuid4().hex[:8]}"
    store.put_bytes(run_lease_path("r1"), json.dumps({"owner": owner, "at": time.time(), "ttl_s": 600}).encode())
    found = Lease(store, run_lease_path("r1"), what="run r1").acquire()
    assert found is not None and found.owner == owner and not found.live()


def test_lease_of_another_host_expires_after_its_ttl(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    body = {"owner": "elsewhere:1:abc", "at": time.time(), "ttl_s": 1.0}
    store.put_bytes(run_lease_path("r1"), json.dumps(body).encode())
    lease = Lease(store, run_lease_path("r1"), what="run r1")
    with pytest.raises(LeaseHeld):
        lease.acquire()
    time.sleep(1.2)
    lease.acquire()


def test_racing_writer_loses_on_confirm(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    slow, fast = (Lease(store, run_lease_path("r1"), what="run r1") for _ in range(2))
    original = slow._write

    def write_then_get_overtaken(at: float) -> None:
        original(at)
        fast._write(time.time())  # the other writer's write lands right after ours

    slow._write = write_then_get_overtaken  # type: ignore[method-assign]
    with pytest.raises(LeaseHeld, match="taken by another process at the same moment"):
        slow.acquire(confirm_s=0.05)


def test_heartbeat_notices_a_lost_lease(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    holder = Lease(store, run_lease_path("r1"), what="run r1", ttl_s=0.4)
    holder.acquire()
    holder.start_heartbeat(interval_s=0.1)
    time.sleep(0.3)
    assert not holder.lost
    store.put_bytes(run_lease_path("r1"), json.dumps({"owner": "elsewhere:1:x", "at": time.time(),
                                                       "ttl_s": 60}).encode())
    deadline = time.monotonic() + 3
    while not holder.lost and time.monotonic() < deadline:
        time.sleep(0.05)
    holder.stop_heartbeat()
    assert "held by elsewhere:1:x" in holder.lost


def test_orphan_cleanup_spares_files_newer_than_the_heartbeat(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    part = tmp_path / "steps" / "run_id=r1"
    part.mkdir(parents=True)
    old, new = part / "part-old.zstd.parquet", part / "part-new.zstd.parquet"
    old.write_bytes(b"x")
    new.write_bytes(b"x")
    heartbeat = time.time() - 30
    os.utime(old, (heartbeat - 60, heartbeat - 60))  # written before the last heartbeat: an orphan
    assert store.remove_orphans("r1", older_than=heartbeat) == 1
    assert not old.exists() and new.exists()  # the newer file may be another writer's, uncommitted
    assert pafs.LocalFileSystem().get_file_info(str(new)).type == pafs.FileType.File

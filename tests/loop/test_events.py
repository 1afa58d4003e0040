"""The loop's event log: append-only, contiguous, one run per step key, in a local or S3 store."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import pytest

from cluster.loop.events import Event, EventLog, EventLogError, step_key
from rollout.store import TrajectoryStore

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture
def store(tmp_path: Path) -> TrajectoryStore:
    return TrajectoryStore(str(tmp_path / "store"))


def test_events_append_in_order_and_survive_a_new_process(store: TrajectoryStore) -> None:
    log = EventLog(store, "a")
    log.append("init", "init", 0, {"x": 1})
    log.append(step_key(1, "collect"), "collect", 1, {"n_new": 3})
    log.append(step_key(1, "train"), "train", 1, {"version": "c0001"})
    again = EventLog(store, "a")  # what a restarted loop sees
    events = again.events()
    assert [(e.seq, e.key) for e in events] == [(1, "init"), (2, "c0001.collect"), (3, "c0001.train")]
    assert again.get("c0001.collect").data == {"n_new": 3}
    assert again.last("train").data["version"] == "c0001" and again.last("gate") is None
    assert EventLog(store, "other").events() == []


def test_a_step_key_is_written_once(store: TrajectoryStore) -> None:
    log = EventLog(store, "a")
    log.append("c0001.promote", "promote", 1, {})
    with pytest.raises(EventLogError, match="already in the log"):
        log.append("c0001.promote", "promote", 1, {})
    with pytest.raises(EventLogError, match="already in the log"):
        EventLog(store, "a").append("c0001.promote", "promote", 1, {})


def _event_path(store: TrajectoryStore, seq: int) -> Path:
    return Path(store.fs_path(f"loop/a/events/{seq:08d}.json"))


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_text("{not json"), "00000002.json: not a loop event"),
    (lambda p: p.write_text(json.dumps({"seq": 2, "key": "k"})), "not a loop event"),
    (lambda p: p.unlink(), "event 2 is missing"),
    (lambda p: p.write_text(p.read_text().replace('"format": 1', '"format": 9')), "event format 9"),
    (lambda p: p.write_text(p.read_text().replace('"seq": 2', '"seq": 5')), "holds event seq 5"),
])
def test_a_damaged_log_is_refused_naming_the_problem(store: TrajectoryStore, damage, message: str) -> None:
    log = EventLog(store, "a")
    for i, key in enumerate(("init", "c0001.collect", "c0001.train")):
        log.append(key, key.split(".")[-1], i, {})
    damage(_event_path(store, 2))
    with pytest.raises(EventLogError, match=message):
        EventLog(store, "a").events()


def test_a_second_writer_is_refused_while_the_lease_is_live(store: TrajectoryStore) -> None:
    first, second = EventLog(store, "a"), EventLog(store, "a")
    first.acquire_lease()
    with pytest.raises(EventLogError, match="running elsewhere"):
        second.acquire_lease()
    with pytest.raises(EventLogError, match="lease is held"):
        second.append("init", "init", 0, {})
    first.release_lease()
    second.acquire_lease()
    second.append("init", "init", 0, {})
    # A lease whose holder stopped renewing it expires.
    third = EventLog(store, "a")
    store.put_bytes("loop/a/lease.json", json.dumps({"owner": "dead:1", "at": time.time() - 10,
                                                     "ttl_s": 5}).encode())
    third.acquire_lease()


def test_event_json_round_trip() -> None:
    event = Event(seq=1, key="init", step="init", cycle=0, at=1.0, data={"a": [1, 2]})
    assert Event.from_json(event.to_json(), "x") == event


def test_event_log_on_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.s3_server import S3Server

    with S3Server() as server:
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        bucket = f"halo-{uuid.uuid4().hex[:10]}"
        server.create_bucket(bucket)
        store = TrajectoryStore(f"s3://{bucket}/store")
        log = EventLog(store, "s3loop")
        log.acquire_lease()
        log.append("init", "init", 0, {"serving": {"version": "v0"}})
        snapshot_file = log.put_json("datasets/c0001.json", {"new": ["e"]})
        log.append("c0001.collect", "collect", 1, {"snapshot_file": snapshot_file})
        fresh = EventLog(TrajectoryStore(f"s3://{bucket}/store"), "s3loop")
        assert [e.key for e in fresh.events()] == ["init", "c0001.collect"]
        assert fresh.get_json("datasets/c0001.json") == {"new": ["e"]}
        with pytest.raises(EventLogError, match="missing"):
            fresh.get_json("datasets/c0009.json")
        log.release_lease()

"""The loop's append-only, versioned event log, kept in the trajectory store.

Each completed step of a cycle is one JSON object `loop/<name>/events/<seq>.json` (seq = 1, 2, ...,
zero-padded so listing order is log order). An object is written whole (S3 PUT; local: temp file +
rename) and never rewritten, so a crash leaves either the event or nothing. Every event carries an
idempotency key (`c0003.train`, ...): a step whose key is in the log is done and is never run again,
which is how a restarted loop resumes and why a candidate is never trained or promoted twice.

A lease object (rollout/store/lease.py, shared with rollout runs) keeps a second loop process
from writing the same log at the same time.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from rollout.store.lease import LEASE_TTL_S, Lease, LeaseHeld, new_owner
from solvers.errors import HaloError

EVENT_FORMAT = 1


class EventLogError(HaloError, RuntimeError):
    pass


@dataclass(frozen=True)
class Event:
    seq: int
    key: str  # idempotency key: "init", "c0001.collect", "c0001.train", ...
    step: str  # init | collect | train | gate | promote | done
    cycle: int
    at: float
    data: dict[str, Any] = field(default_factory=dict)
    format: int = EVENT_FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=1)

    @classmethod
    def from_json(cls, text: str, where: str) -> Event:
        try:
            raw = json.loads(text)
            event = cls(**raw)
        except (ValueError, TypeError) as exc:
            raise EventLogError(f"{where}: not a loop event: {exc}") from exc
        if event.format != EVENT_FORMAT:
            raise EventLogError(f"{where}: event format {event.format} (this code reads {EVENT_FORMAT})")
        return event


def step_key(cycle: int, step: str) -> str:
    return f"c{cycle:04d}.{step}"


class EventLog:
    def __init__(self, store: Any, name: str) -> None:
        self.store = store
        self.prefix = f"loop/{name}"
        self.owner = new_owner()
        self._lease = Lease(store, f"{self.prefix}/lease.json", what=f"loop {self.prefix}", owner=self.owner)
        self._events: list[Event] | None = None

    # ---- reading --------------------------------------------------------------------------

    def events(self, *, refresh: bool = False) -> list[Event]:
        if self._events is None or refresh:
            self._events = self._read_all()
        return list(self._events)

    def _read_all(self) -> list[Event]:
        import pyarrow.fs as pafs

        base = self.store.fs_path(f"{self.prefix}/events")
        infos = self.store.filesystem.get_file_info(pafs.FileSelector(base, allow_not_found=True))
        names = sorted(i.base_name for i in infos if i.is_file and i.base_name.endswith(".json"))
        events = []
        for name in names:
            data = self.store.get_bytes(f"{self.prefix}/events/{name}")
            event = Event.from_json(data.decode(), f"{self.prefix}/events/{name}")
            if f"{event.seq:08d}.json" != name:
                raise EventLogError(f"{self.prefix}/events/{name}: holds event seq {event.seq}")
            events.append(event)
        for i, event in enumerate(events, start=1):
            if event.seq != i:
                raise EventLogError(f"{self.prefix}/events: event {i} is missing (log is not contiguous)")
        keys = [e.key for e in events]
        if len(set(keys)) != len(keys):
            raise EventLogError(f"{self.prefix}/events: a step key appears twice")
        return events

    def get(self, key: str) -> Event | None:
        return next((e for e in self.events() if e.key == key), None)

    def last(self, step: str | None = None) -> Event | None:
        matching = [e for e in self.events() if step is None or e.step == step]
        return matching[-1] if matching else None

    # ---- writing --------------------------------------------------------------------------

    def append(self, key: str, step: str, cycle: int, data: dict[str, Any]) -> Event:
        events = self.events()
        if any(e.key == key for e in events):
            raise EventLogError(f"step {key} is already in the log; a step runs once")
        self._check_lease()
        event = Event(seq=len(events) + 1, key=key, step=step, cycle=cycle, at=time.time(), data=data)
        path = f"{self.prefix}/events/{event.seq:08d}.json"
        if self.store.exists(path):  # another writer got here first despite the lease
            raise EventLogError(f"{path} exists: another loop process writes this log")
        self.store.put_bytes(path, event.to_json().encode())
        self._events = [*events, event]
        self.renew_lease()
        return event

    def acquire_lease(self, ttl_s: float = LEASE_TTL_S) -> None:
        """Refuse to start while another live loop process holds this log."""
        self._lease.ttl_s = ttl_s
        try:
            self._lease.acquire()
        except LeaseHeld as exc:
            raise EventLogError(f"loop {self.prefix} is running elsewhere ({exc}); stop it or wait "
                                f"{ttl_s:.0f}s") from exc

    def renew_lease(self, ttl_s: float = LEASE_TTL_S) -> None:
        self._lease.ttl_s = ttl_s
        self._lease._write(time.time())

    def release_lease(self) -> None:
        self._lease.release()

    def _check_lease(self) -> None:
        held = self._lease.holder()
        if held is not None:
            raise EventLogError(f"loop {self.prefix} lease is held by {held.owner}")

    # ---- side files (dataset lists, ...) ----------------------------------------------------

    def put_json(self, relative: str, data: Any) -> str:
        """Write a side file next to the log; returns `relative` (what events refer to)."""
        self.store.put_bytes(f"{self.prefix}/{relative}", json.dumps(data, sort_keys=True).encode())
        return relative

    def get_json(self, relative: str) -> Any:
        raw = self.store.get_bytes(f"{self.prefix}/{relative}")
        if raw is None:
            raise EventLogError(f"{self.prefix}/{relative}: missing (the event log refers to it)")
        return json.loads(raw)

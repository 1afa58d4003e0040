"""A lease object in the store: one live writer of a thing at a time (a rollout run, a loop's log).

The lease is one small JSON object `{"owner", "at", "ttl_s", "acquired_at"}` written whole. Its
holder renews `at` (a heartbeat) well within `ttl_s`; a lease whose holder stopped renewing it is
expired, and so is one whose holder is a process on this host that no longer exists (a `kill -9`
frees it at once instead of after `ttl_s`).

Taking a lease is write-then-confirm: the writer reads the lease, writes its own, waits
`confirm_s` and reads it back; of two writers racing, the later write wins and the other sees a
foreign owner and gives up. The holder's heartbeat also reads before it writes, so a holder that
lost its lease (it stalled past the TTL and another took over) learns it and stops.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from solvers.errors import BusyError

log = logging.getLogger(__name__)

LEASE_TTL_S = 120.0
LEASES_DIR = "leases"


def run_lease_path(run_id: str) -> str:
    """The lease of a rollout run (not under runs/, whose every .json is run metadata)."""
    return f"{LEASES_DIR}/runs/{run_id}.json"


def run_stop_path(run_id: str) -> str:
    """A stop request for a rollout run (`halo runs stop`): its writer ends as interrupted."""
    return f"{LEASES_DIR}/runs/{run_id}.stop"


# Owners in this process that released their lease, even when the store could not be told (an
# outage): a later writer in the same process need not wait out their TTL.
_RELEASED: set[str] = set()


class LeaseHeld(BusyError, RuntimeError):
    """Another live process holds the lease."""


@dataclass(frozen=True)
class LeaseInfo:
    owner: str  # "host:pid:nonce", "" for a released lease
    at: float  # the last heartbeat (epoch seconds)
    ttl_s: float
    acquired_at: float = 0.0

    def live(self, now: float | None = None) -> bool:
        if not self.owner or self.owner in _RELEASED or (now or time.time()) - self.at >= self.ttl_s:
            return False
        return not _dead_here(self.owner)

    def describe(self) -> str:
        return f"{self.owner}, last heartbeat {time.time() - self.at:.0f}s ago"


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _dead_here(owner: str) -> bool:
    """True when the owner is a process of this host that is gone."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


class Lease:
    def __init__(self, store: Any, path: str, *, what: str, ttl_s: float = LEASE_TTL_S,
                 owner: str | None = None) -> None:
        self.store = store
        self.path = path
        self.what = what  # for messages: "run r1", "loop loop/a"
        self.ttl_s = ttl_s
        self.owner = owner or new_owner()
        self.acquired_at = 0.0
        self.lost = ""  # why the heartbeat stopped (another owner took the lease), "" while held
        self.failed_beats = 0  # renewals that failed (a store blip; the next beat tries again)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- reading --------------------------------------------------------------------------

    def read(self) -> LeaseInfo | None:
        raw = self.store.get_bytes(self.path)
        if not raw:
            return None
        try:
            data = json.loads(raw)
            return LeaseInfo(str(data["owner"]), float(data["at"]), float(data.get("ttl_s", self.ttl_s)),
                             float(data.get("acquired_at", 0.0)))
        except (ValueError, KeyError, TypeError):
            return None  # a torn or foreign object holds nothing

    def holder(self) -> LeaseInfo | None:
        """The live lease of another owner, if any."""
        held = self.read()
        return held if held is not None and held.owner != self.owner and held.live() else None

    # ---- writing --------------------------------------------------------------------------

    def acquire(self, *, confirm_s: float = 0.0) -> LeaseInfo | None:
        """Take the lease or raise LeaseHeld; returns the lease found before (expired or released)."""
        before = self.read()
        if before is not None and before.owner != self.owner and before.live():
            raise LeaseHeld(f"{self.what} is being written by another process ({before.describe()}); "
                            f"stop it first, or wait until its lease expires ({before.ttl_s:.0f}s "
                            f"without a heartbeat)")
        self.acquired_at = time.time()
        _RELEASED.discard(self.owner)
        self._write(self.acquired_at)
        if confirm_s > 0:
            time.sleep(confirm_s)
            now = self.read()
            if now is None or now.owner != self.owner:
                raise LeaseHeld(f"{self.what} was taken by another process at the same moment "
                                f"({now.describe() if now else 'lease gone'})")
        return before

    def renew(self) -> None:
        held = self.read()
        if held is not None and held.owner not in ("", self.owner) and held.live():
            raise LeaseHeld(f"{self.what}: the lease is held by {held.owner}")
        self._write(time.time())

    def release(self) -> None:
        self.stop_heartbeat()
        _RELEASED.add(self.owner)  # first: if the store cannot be told, this process still knows
        held = self.read()
        if held is not None and held.owner == self.owner:
            self.store.put_bytes(self.path, json.dumps({"owner": "", "at": 0.0, "ttl_s": 0.0}).encode())

    def _write(self, at: float) -> None:
        body = {"owner": self.owner, "at": at, "ttl_s": self.ttl_s, "acquired_at": self.acquired_at}
        self.store.put_bytes(self.path, json.dumps(body).encode())

    # ---- heartbeat ------------------------------------------------------------------------

    def start_heartbeat(self, interval_s: float | None = None) -> None:
        """Renew in a daemon thread every `interval_s` (default: a quarter of the TTL)."""
        interval = interval_s or self.ttl_s / 4

        def beat() -> None:
            while not self._stop.wait(interval):
                try:
                    self.renew()
                except LeaseHeld as exc:
                    self.lost = str(exc)
                    return
                except Exception as exc:  # noqa: BLE001  (a store blip: the next beat tries again)
                    self.failed_beats += 1
                    log.warning("lease of %s: renewal failed (%s: %s); the next beat tries again",
                                self.what, type(exc).__name__, exc)

        self._stop.clear()
        self._thread = threading.Thread(target=beat, name="halo-lease", daemon=True)
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._thread.join(timeout=5)
            self._thread = None

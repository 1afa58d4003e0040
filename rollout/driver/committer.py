"""The single committer: batches finished episodes (as Arrow step rows) and commits them to the store.

One thread, one writer per run. A batch is committed when it reaches `max_rows` step rows or
`max_episodes` episodes, or when its oldest episode has waited `max_age_s`. A storage outage
past the store's retry budget stops the committer; the job sees `failure` and stops too.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

import pyarrow as pa

from rollout.store import StoreUnavailable, TrajectoryStore

log = logging.getLogger(__name__)
_FLUSH = object()


class Committer:
    def __init__(self, store: TrajectoryStore, run_id: str, *, max_rows: int = 20_000, max_episodes: int = 2_000,
                 max_age_s: float = 2.0) -> None:
        self.store = store
        self.run_id = run_id
        self.max_rows = max_rows
        self.max_episodes = max_episodes
        self.max_age_s = max_age_s
        self.committed = 0  # episodes newly committed by this committer
        self.commits = 0
        self.rows = 0
        self.commit_s = 0.0  # time spent inside store.write_episodes
        self.failure: BaseException | None = None
        self._queue: queue.Queue[object] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="halo-committer", daemon=True)
        self._pending = 0
        self._lock = threading.Lock()

    def start(self) -> Committer:
        self._thread.start()
        return self

    @property
    def pending(self) -> int:
        """Episodes handed over but not yet committed."""
        with self._lock:
            return self._pending

    def submit(self, rows: pa.Table) -> bool:
        """Queue a finished episode; False once the committer has stopped on a failure (the job then
        stops too, and the episode is re-run when the job is resumed)."""
        if self.failure is not None:
            return False
        with self._lock:
            self._pending += 1
        self._queue.put(rows)
        return True

    def close(self, timeout_s: float | None = None) -> None:
        """Commit everything submitted so far, then stop."""
        self._queue.put(_FLUSH)
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        batch: list[pa.Table] = []
        rows = 0
        oldest = 0.0
        while True:
            timeout = max(0.01, oldest + self.max_age_s - time.monotonic()) if batch else None
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            closing = item is _FLUSH
            if isinstance(item, pa.Table):
                if not batch:
                    oldest = time.monotonic()
                batch.append(item)
                rows += item.num_rows
            due = batch and (closing or rows >= self.max_rows or len(batch) >= self.max_episodes
                             or time.monotonic() - oldest >= self.max_age_s)
            if due:
                if not self._commit(batch):
                    return
                batch, rows = [], 0
            if closing:
                return

    def _commit(self, batch: list[pa.Table]) -> bool:
        t0 = time.perf_counter()
        try:
            new = self.store.write_table(self.run_id, pa.concat_tables(batch).combine_chunks())
        except StoreUnavailable as exc:
            self.failure = exc
            return False
        except Exception as exc:  # noqa: BLE001  (a bug or bad record: stop the job, report it)
            log.exception("commit failed")
            self.failure = exc
            return False
        self.commit_s += time.perf_counter() - t0
        self.commits += 1
        self.committed += new
        self.rows += sum(t.num_rows for t in batch)
        with self._lock:
            self._pending -= len(batch)
        return True

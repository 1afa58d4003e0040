"""The single committer: batches finished episodes (as Arrow step rows) and commits them to the store.

One thread, one writer per run. A batch is committed when it reaches `max_rows` step rows or
`max_episodes` episodes, or when its oldest episode has waited `max_age_s`. A storage outage
past the store's retry budget stops the committer; the job sees `failure` and stops too.
"""

from __future__ import annotations

import logging
import threading
import time

import pyarrow as pa

from rollout.store import StoreUnavailable, TrajectoryStore

log = logging.getLogger(__name__)


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
        self._thread = threading.Thread(target=self._loop, name="halo-committer", daemon=True)
        # Finished episodes wait in an inbox; the committer thread is woken only when a batch
        # starts (to arm its age deadline), fills up, or the job closes, not once per submission:
        # a wake-up per episode cost the driver a thread switch each time.
        self._cond = threading.Condition()
        self._inbox: list[tuple[pa.Table, int]] = []
        self._inbox_rows = 0
        self._inbox_episodes = 0
        self._oldest = 0.0
        self._closing = False
        self._pending = 0

    def start(self) -> Committer:
        self._thread.start()
        return self

    @property
    def pending(self) -> int:
        """Episodes handed over but not yet committed."""
        with self._cond:
            return self._pending

    def submit(self, rows: pa.Table, *, episodes: int = 1) -> bool:
        """Queue the step rows of `episodes` finished episodes; False once the committer has stopped on
        a failure (the job then stops too, and the episodes are re-run when the job is resumed)."""
        if self.failure is not None:
            return False
        with self._cond:
            first = not self._inbox
            if first:
                self._oldest = time.monotonic()
            self._inbox.append((rows, episodes))
            self._inbox_rows += rows.num_rows
            self._inbox_episodes += episodes
            self._pending += episodes
            if first or self._full():
                self._cond.notify()
        return True

    def close(self, timeout_s: float | None = None) -> None:
        """Commit everything submitted so far, then stop."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout_s)

    def _full(self) -> bool:
        return self._inbox_rows >= self.max_rows or self._inbox_episodes >= self.max_episodes

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._closing or self._full()):
                    if not self._inbox:
                        self._cond.wait()
                        continue
                    left = self._oldest + self.max_age_s - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch, self._inbox = self._inbox, []
                self._inbox_rows = self._inbox_episodes = 0
                closing = self._closing
            if batch and not self._commit(batch):
                return
            if closing:
                return

    def _commit(self, batch: list[tuple[pa.Table, int]]) -> bool:
        t0 = time.perf_counter()
        tables = [table for table, _ in batch]
        try:
            new = self.store.write_table(self.run_id, pa.concat_tables(tables).combine_chunks())
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
        self.rows += sum(t.num_rows for t in tables)
        with self._cond:
            self._pending -= sum(n for _, n in batch)
        return True

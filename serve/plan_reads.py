"""Polls of plan jobs (`GET /v1/plans/{id}`), answered on the replica's event loop without a thread.

A poll runs on the same replica, and the same event loop, as the interactive /v1/decide calls, so
what it costs is paid by their latency tail. For a store on a local disk a job's document is read
inline (a page-cache read of a few KB) and kept encoded: the runner replaces a document by
temp file + rename, so a file whose (inode, mtime, size) is unchanged is the one already encoded,
and a poll that finds its job unchanged costs one stat call. A store on S3 is read in a worker
thread as before (serve/plan_api.py); this module is only the local path.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from serve.plan_jobs import JOBS_DIR, PlanStore
from serve.plan_schemas import TERMINAL, public_view

CACHED_JOBS = 4096  # encoded documents kept per replica (a few KB each)
POLL_HINT_MAX_S = 10  # the longest Retry-After a poll of an unfinished job is given


@dataclass(frozen=True)
class JobDocument:
    owner: str
    body: bytes  # the API's view (public_view), encoded as JSON
    next_change_at: float | None = None  # when the next step is due (epoch s); None once ended

    def poll_after_s(self, now: float | None = None) -> int | None:
        """Retry-After for a poll of this job: seconds until its next step is due (1..POLL_HINT_MAX_S),
        None once the job has ended."""
        if self.next_change_at is None:
            return None
        wait = self.next_change_at - (time.time() if now is None else now)
        return max(1, min(POLL_HINT_MAX_S, math.ceil(wait)))


def job_document(job: dict[str, Any]) -> JobDocument:
    """A stored job as a poll answers it. The next step is expected one mean step time (the job's
    own pace so far) after its last change; a job without steps yet is looked at again in a second."""
    next_at = None
    if job.get("status") not in TERMINAL:
        steps = len(job.get("steps") or [])
        pace = float(job.get("elapsed_s") or 0.0) / steps if steps else 0.0
        next_at = float(job.get("updated_at") or 0.0) + pace
    return JobDocument(str(job.get("owner", "")), json.dumps(public_view(job)).encode(), next_at)


class LocalJobReader:
    """Job documents of a local store, read inline and cached by file version."""

    def __init__(self, store: PlanStore, capacity: int = CACHED_JOBS) -> None:
        self._dir = store.store.fs_path(JOBS_DIR)
        self._capacity = capacity
        self._cache: OrderedDict[str, tuple[tuple[int, int, int], JobDocument]] = OrderedDict()

    def read(self, job_id: str) -> JobDocument | None:
        """The job's document, or None when the store has no such job."""
        path = os.path.join(self._dir, f"{job_id}.json")
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                version = (st.st_ino, st.st_mtime_ns, st.st_size)
                cached = self._cache.get(job_id)
                if cached is not None and cached[0] == version:
                    self._cache.move_to_end(job_id)
                    return cached[1]
                job = json.loads(f.read())
        except FileNotFoundError:
            return None
        doc = job_document(job)
        self._cache[job_id] = (version, doc)
        if len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
        return doc


def local_reader(store: PlanStore) -> LocalJobReader | None:
    """The inline reader for a store on a local disk; None for S3 (read in a thread)."""
    return None if store.store.blobs.location.is_s3 else LocalJobReader(store)

"""Retrying storage calls with exponential backoff and a total time budget.

Object stores fail transiently (dropped connections, 5xx, throttling). Every store operation
runs through `retry_call`; when the budget runs out the caller gets `StoreUnavailable`, whose
message says what failed and that committed data is intact (commits are all-or-nothing).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class StoreError(RuntimeError):
    """A store operation that cannot succeed (bad input, incompatible table)."""


class StoreUnavailable(StoreError):
    """Storage stayed unreachable for longer than the retry budget."""


@dataclass(frozen=True)
class RetryPolicy:
    budget_s: float = 60.0  # total time spent retrying one operation before giving up
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0

    def delays(self) -> Callable[[int], float]:
        def delay(attempt: int) -> float:
            base = min(self.max_backoff_s, self.initial_backoff_s * (2 ** attempt))
            return base * (0.5 + random.random() / 2)  # jitter so retrying writers spread out
        return delay


def is_transient(exc: BaseException) -> bool:
    """Connection errors, timeouts and 5xx surface as OSError from pyarrow and deltalake."""
    from deltalake.exceptions import CommitFailedError, DeltaError, SchemaMismatchError, TableNotFoundError

    if isinstance(exc, SchemaMismatchError | TableNotFoundError | FileNotFoundError | PermissionError):
        return False
    return isinstance(exc, OSError | CommitFailedError | DeltaError | ConnectionError | TimeoutError)


def retry_call(fn: Callable[[], T], *, what: str, where: str, policy: RetryPolicy) -> T:
    delay = policy.delays()
    deadline = time.monotonic() + policy.budget_s
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            if not is_transient(exc):
                raise
            attempt += 1
            pause = delay(attempt - 1)
            if time.monotonic() + pause > deadline:
                first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise StoreUnavailable(
                    f"storage at {where} unavailable: {what} failed {attempt} times over "
                    f"{policy.budget_s:.0f}s (last error: {first_line}). Nothing was half-committed: "
                    f"every commit is all-or-nothing; re-run the same job (same --run-id) to resume."
                ) from exc
            log.warning("%s failed (%s); retry %d in %.1fs", what, type(exc).__name__, attempt, pause)
            time.sleep(pause)

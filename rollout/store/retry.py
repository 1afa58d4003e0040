"""Retrying storage calls with exponential backoff and a total time budget.

Object stores fail transiently (dropped connections, 5xx, throttling). Every store operation
runs through `retry_call`; when the budget runs out the caller gets `StoreUnavailable`, whose
message says what failed and that committed data is intact (commits are all-or-nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception

from rollout.llm.backoff import RetryPolicy
from solvers.errors import HaloError, InfraError

T = TypeVar("T")
log = logging.getLogger(__name__)


class StoreError(HaloError, RuntimeError):
    """A store operation that cannot succeed (bad input, incompatible table)."""


class StoreUnavailable(StoreError, InfraError):
    """Storage stayed unreachable for longer than the retry budget."""

    kind = "store"


DEFAULT_RETRY = RetryPolicy(budget_s=60.0, initial_backoff_s=0.2, max_backoff_s=5.0)


def retrying(policy: RetryPolicy, what: str) -> Retrying:
    """Transient failures retried with jittered backoff until the policy stops (the next pause would
    overrun its budget); each retry logged."""
    def log_retry(retry_state: RetryCallState) -> None:
        assert retry_state.outcome is not None
        log.warning("%s failed (%s); retry %d in %.1fs", what, type(retry_state.outcome.exception()).__name__,
                    retry_state.attempt_number, retry_state.upcoming_sleep)

    # jitter so that retrying writers spread out
    return Retrying(retry=retry_if_exception(is_transient), stop=policy.stop(), wait=policy.wait(),
                    before_sleep=log_retry)


def is_transient(exc: BaseException) -> bool:
    """Connection errors, timeouts and 5xx surface as OSError from pyarrow and deltalake."""
    from deltalake.exceptions import CommitFailedError, DeltaError, SchemaMismatchError, TableNotFoundError

    if isinstance(exc, SchemaMismatchError | TableNotFoundError | FileNotFoundError | PermissionError):
        return False
    return isinstance(exc, OSError | CommitFailedError | DeltaError | ConnectionError | TimeoutError)


def retry_call(fn: Callable[[], T], *, what: str, where: str, policy: RetryPolicy) -> T:
    try:
        return retrying(policy, what)(fn)
    except RetryError as err:
        exc = err.last_attempt.exception()
        text = str(exc).strip()
        first_line = text.splitlines()[0] if text else type(exc).__name__
        over = f" over {policy.budget_s:.0f}s" if policy.budget_s is not None else ""
        raise StoreUnavailable(
            f"storage at {where} unavailable: {what} failed {err.last_attempt.attempt_number} times{over} "
            f"(last error: {first_line}). Nothing was half-committed: "
            f"every commit is all-or-nothing; re-run the same job (same --run-id) to resume."
        ) from exc


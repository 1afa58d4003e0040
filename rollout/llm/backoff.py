"""The waits and stops every retry loop in rollout shares, as tenacity strategies.

Each retry loop (the object store, the LLM client, the decision-service client) runs on tenacity
with these pieces, so backoff and Retry-After mean one thing everywhere:

- `wait_equal_jitter(initial_s, max_s)`: exponential backoff capped at `max_s`, with "equal jitter"
  (a pause is never less than half its step) so that retrying callers spread out.
- `wait_retry_after(fallback, cap_s)`: the pause the server asked for (the failure's `retry_after`,
  in seconds), at most `cap_s`, plus up to `jitter_s`; the fallback wait when it asked for none.
- `stop_if_retry_after_over(limit_s)`: give up when the server asks for a longer pause than that.
- `retry_after_seconds(headers)`: seconds from `retry-after-ms` or `Retry-After` (seconds or an
  HTTP date); the value a failure carries as `retry_after`.

`RetryPolicy` is the one set of knobs a caller passes to a retrying client (the store, the
decision-service client): at most `retries` retries and/or `budget_s` seconds, jittered
exponential backoff from `initial_backoff_s` to `max_backoff_s`, a server's Retry-After honoured
up to `max_backoff_s`. Each client keeps its own rule for which failures are transient.
"""

from __future__ import annotations

import email.utils
import functools
import operator
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tenacity import RetryCallState, stop_after_attempt, stop_before_delay
from tenacity.stop import stop_base
from tenacity.wait import wait_base


class wait_equal_jitter(wait_base):  # lower case, like the tenacity strategies it sits beside
    def __init__(self, initial_s: float, max_s: float, rng: random.Random | None = None) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self._random = (rng or random).random

    def __call__(self, retry_state: RetryCallState) -> float:
        step = min(self.max_s, self.initial_s * 2 ** (retry_state.attempt_number - 1))
        return step * (0.5 + self._random() / 2)


class wait_retry_after(wait_base):
    def __init__(self, fallback: wait_base, cap_s: float, jitter_s: float = 0.0,
                 rng: random.Random | None = None) -> None:
        self.fallback = fallback
        self.cap_s = cap_s
        self.jitter_s = jitter_s
        self._random = (rng or random).random

    def __call__(self, retry_state: RetryCallState) -> float:
        asked = retry_after_of(retry_state)
        if asked is None:
            return self.fallback(retry_state)
        return min(asked, self.cap_s) + self._random() * self.jitter_s


class stop_if_retry_after_over(stop_base):
    """A Retry-After beyond `limit_s` fails the call instead of stalling it."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s

    def __call__(self, retry_state: RetryCallState) -> bool:
        asked = retry_after_of(retry_state)
        return asked is not None and asked > self.limit_s


def retry_after_of(retry_state: RetryCallState) -> float | None:
    """The `retry_after` (seconds) of the attempt's failure, when it carries one."""
    outcome = retry_state.outcome
    if outcome is None or not outcome.failed:
        return None
    value = getattr(outcome.exception(), "retry_after", None)
    return None if value is None else float(value)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date); None when absent or unreadable."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """How long one call retries its transient failures; at least one of `retries`, `budget_s` bounds it."""

    retries: int | None = None  # retries after the first attempt
    budget_s: float | None = None  # total time retrying one call: no pause that would overrun it is taken
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0  # also the longest Retry-After honoured

    def __post_init__(self) -> None:
        if self.retries is None and self.budget_s is None:
            raise ValueError("a RetryPolicy needs retries or budget_s: an unbounded retry hides an outage")

    def stop(self) -> stop_base:
        stops: list[stop_base] = []
        if self.retries is not None:
            stops.append(stop_after_attempt(self.retries + 1))
        if self.budget_s is not None:
            stops.append(stop_before_delay(self.budget_s))
        return functools.reduce(operator.or_, stops)

    def wait(self, rng: random.Random | None = None) -> wait_base:
        backoff = wait_equal_jitter(self.initial_backoff_s, self.max_backoff_s, rng)
        return wait_retry_after(backoff, self.max_backoff_s)

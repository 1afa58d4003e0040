"""The shared retry waits (rollout.llm.backoff) in a real tenacity loop: Retry-After honoured and capped."""

from __future__ import annotations

import email.utils
import random
import time

import pytest
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from rollout.llm.backoff import (
    retry_after_seconds,
    stop_if_retry_after_over,
    wait_equal_jitter,
    wait_retry_after,
)


class Busy(Exception):
    def __init__(self, retry_after: float | None) -> None:
        super().__init__(f"busy, retry after {retry_after}")
        self.retry_after = retry_after


def run(asked: list[float | None], wait, stop=None) -> tuple[list[float], int]:
    """Fail once per entry of `asked` (each failure asking for that Retry-After), then succeed."""
    slept: list[float] = []
    calls = iter(asked)

    def attempt() -> str:
        value = next(calls, "done")
        if value == "done":
            return "ok"
        raise Busy(value)

    retrying = Retrying(retry=retry_if_exception_type(Busy), wait=wait, sleep=slept.append, reraise=True,
                        stop=stop or stop_after_attempt(len(asked) + 1))
    assert retrying(attempt) == "ok"
    return slept, retrying.statistics["attempt_number"]


def test_retry_after_is_honoured_and_capped_else_backoff():
    backoff = wait_equal_jitter(0.1, 0.4, random.Random(7))
    slept, attempts = run([0.3, 50.0, None, None, None, 0.0], wait_retry_after(backoff, cap_s=2.0))
    assert attempts == 7
    assert slept[:2] == [0.3, 2.0]  # what the server asked for, a long ask cut to the cap
    # no Retry-After: equal jitter on 0.1 * 2**n capped at 0.4 (never less than half the step)
    for pause, step in zip(slept[2:5], (0.4, 0.4, 0.4), strict=True):
        assert step / 2 <= pause <= step
    assert slept[5] == 0.0


def test_backoff_steps_double_up_to_the_cap():
    slept, _ = run([None] * 5, wait_equal_jitter(0.1, 0.5, random.Random(1)))
    for pause, step in zip(slept, (0.1, 0.2, 0.4, 0.5, 0.5), strict=True):
        assert step / 2 <= pause <= step


def test_jitter_is_added_to_the_servers_ask_only():
    wait = wait_retry_after(wait_equal_jitter(1.0, 1.0), cap_s=10.0, jitter_s=0.05, rng=random.Random(3))
    slept, _ = run([1.0, 1.0], wait)
    assert all(1.0 <= pause <= 1.05 for pause in slept) and slept[0] != slept[1]


def test_a_retry_after_beyond_the_limit_stops_at_once():
    with pytest.raises(Busy):
        run([30.0], wait_retry_after(wait_equal_jitter(0.01, 0.01), cap_s=60.0),
            stop=stop_after_attempt(5) | stop_if_retry_after_over(1.0))
    slept, attempts = run([0.5], wait_retry_after(wait_equal_jitter(0.01, 0.01), cap_s=60.0),
                          stop=stop_after_attempt(5) | stop_if_retry_after_over(1.0))
    assert (slept, attempts) == ([0.5], 2)


def test_retry_after_headers():
    assert retry_after_seconds({"retry-after": "2.5"}) == 2.5
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "soon", "retry-after": "9"}) == 9.0
    assert retry_after_seconds({"retry-after": "-4"}) == 0.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "whenever"}) is None
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.0 <= retry_after_seconds({"retry-after": in_ten}) <= 10.0

"""The plan jobs' client: `plan()` (submit and wait), `plan_async()` (submit, return the job at
once) and `wait()` (follow a job to its end, calling `on_progress` on every change).

Built on the decision client (same key, retries of transport errors, 429 and 5xx honouring
Retry-After, typed errors `DecisionServiceError`). Every submission carries an Idempotency-Key
(a fresh one unless given), so a retried POST can never start a second job.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import httpx
from tenacity import Retrying

from rollout.policies.student_client import DecisionClient, DecisionServiceError, _retry_options, _Transient
from serve.plan_schemas import TERMINAL

# wait()'s polls: every POLL_MIN_S after a change, each unchanged poll waits POLL_GROWTH times
# longer, up to POLL_MAX_S (a job's step takes seconds: 200 waiting clients cost the service a few
# requests a second each at most, not two).
POLL_MIN_S, POLL_MAX_S, POLL_GROWTH = 0.5, 3.0, 1.5


def next_poll_s(previous_s: float, changed: bool, least_s: float = POLL_MIN_S, most_s: float = POLL_MAX_S,
                hint_s: float | None = None) -> float:
    """The pause before the next poll of a job: short after a change, growing while nothing changes.
    With the service's hint (the Retry-After of its last answer: when the job's next step is due)
    the pause after a change is the hint, and an overdue step still backs off; never above most_s."""
    backoff = least_s if changed else min(most_s, max(least_s, previous_s * POLL_GROWTH))
    if hint_s is None:
        return backoff
    return min(max(hint_s, backoff), max(least_s, most_s))


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds (the delta-seconds form), or None when absent or not a number."""
    try:
        return max(0.0, float(headers["retry-after"]))
    except (KeyError, ValueError):
        return None


@dataclass
class PlanJob:
    """A job as GET /v1/plans/{id} shows it (serve/plan_schemas.py PlanOut)."""

    id: str
    status: str
    plan: str = ""
    natural_language_plan: str = ""
    validated: bool = False
    oracle: bool | None = None
    domain: str = ""
    problem: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: int = 0
    cost_usd: float = 0.0
    error: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    resumed: int = 0
    # The service's Retry-After on an unfinished job: when its next step is due (not in the JSON).
    poll_after_s: float | None = None

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlanJob:
        known = {f.name for f in fields(cls)} - {"poll_after_s"}
        return cls(**{k: v for k, v in data.items() if k in known})


class PlanClient(DecisionClient):
    """DecisionClient plus the /v1/plans routes (blocking)."""

    def _request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
                 ) -> dict[str, Any]:
        return self._exchange(method, path, body, headers)[0]

    def _exchange(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
                  ) -> tuple[dict[str, Any], httpx.Headers]:
        """(the answer's body, its headers), retried like every call of this client."""
        what = f"{method} {path}"

        def attempt() -> tuple[dict[str, Any], httpx.Headers]:
            try:
                response = self._client.request(method, path, json=body, headers=headers)
            except httpx.HTTPError as exc:
                return self._check(None, exc, what), httpx.Headers()
            if response.status_code == 202:
                return response.json(), response.headers
            return self._check(response, None, what), response.headers

        try:
            return Retrying(sleep=time.sleep, reraise=True, **_retry_options(self.retry))(attempt)
        except _Transient as last:
            raise self._failure(last.response, last.error, what) from last.error

    def plan_async(self, request: dict[str, Any], idempotency_key: str | None = None) -> PlanJob:
        """Start a job (or find the one this key already started) and return it at once."""
        key = idempotency_key or uuid.uuid4().hex
        created = self._request("POST", "/v1/plans", request, {"Idempotency-Key": key})
        return PlanJob(id=created["id"], status=created["status"])

    def job(self, job_id: str) -> PlanJob:
        data, headers = self._exchange("GET", f"/v1/plans/{job_id}")
        job = PlanJob.from_json(data)
        job.poll_after_s = retry_after_s(headers)
        return job

    def cancel(self, job_id: str) -> PlanJob:
        return PlanJob.from_json(self._request("DELETE", f"/v1/plans/{job_id}"))

    def wait(self, job: PlanJob | str, *, timeout_s: float = 600.0, poll_s: float = POLL_MIN_S,
             max_poll_s: float = POLL_MAX_S, on_progress: Callable[[PlanJob], None] | None = None) -> PlanJob:
        """Follow the job until it ends; `on_progress(job)` on each new step or status. Polls when the
        service says the job's next step is due (its Retry-After, at most `max_poll_s` away); without
        that, every `poll_s` after a change, backing off to `max_poll_s` while nothing changes."""
        job_id = job if isinstance(job, str) else job.id
        deadline = time.monotonic() + timeout_s
        seen: tuple[str, int] = ("", -1)
        pause = poll_s
        while True:
            current = self.job(job_id)
            changed = (current.status, len(current.steps)) != seen
            pause = next_poll_s(pause, changed, poll_s, max(poll_s, max_poll_s), current.poll_after_s)
            if changed:
                seen = (current.status, len(current.steps))
                if on_progress is not None:
                    on_progress(current)
            if current.done:
                return current
            if time.monotonic() >= deadline:
                raise DecisionServiceError(f"plan job {job_id} not finished after {timeout_s:g} s "
                                           f"(status {current.status}, {len(current.steps)} steps)")
            time.sleep(pause)

    def plan(self, request: dict[str, Any], *, idempotency_key: str | None = None, timeout_s: float = 600.0,
             on_progress: Callable[[PlanJob], None] | None = None) -> PlanJob:
        """Start a job and wait for its end: the final job (status succeeded, failed or cancelled)."""
        return self.wait(self.plan_async(request, idempotency_key), timeout_s=timeout_s, on_progress=on_progress)

    def __enter__(self) -> PlanClient:
        return self

"""The served student as a rollout policy: `student:URL` asks the decision service over HTTP.

Student rollouts thereby take the same path production planners do (rules layer, model, version
reporting all happen in the service). Speaks only HTTP, so rollout never imports serve.
Transient failures (connection errors, timeouts, 503 overload, 5xx) are retried with backoff,
honouring Retry-After; client errors (401, 413, 422) are not retried.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from typing import Any

import httpx

from rollout.policy import Decision, Policy
from rollout.state import EpisodeState
from rollout.trajectory import FEEDBACK_STEP_FIELDS, EpisodeRecord

API_KEY_ENV = "HALO_SERVE_API_KEY"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class StudentServiceError(RuntimeError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StudentHTTPPolicy(Policy):
    name = "student"

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 10.0, *,
                 retries: int = 4, backoff_s: float = 0.1, max_backoff_s: float = 5.0, pool: int = 64) -> None:
        self.base_url = base_url.rstrip("/")
        # One bounded pool per process: with a thousand episodes in flight, decisions queue for a
        # connection (no pool timeout) instead of opening a thousand sockets or failing.
        self._limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
        self._async_timeout = httpx.Timeout(timeout, pool=None)
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.timeout = timeout
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.version = "unknown"  # set from the service's answers
        self._client: httpx.Client | None = None
        self._aclient: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None

    # -- plumbing ---------------------------------------------------------------------------------

    def _sync_client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=self.timeout)
        return self._client

    def _async_client(self) -> httpx.AsyncClient:
        # An AsyncClient belongs to the event loop it was created in; rollouts may use several loops.
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aloop is not loop:
            self._aclient = httpx.AsyncClient(base_url=self.base_url, headers=self._headers,
                                              timeout=self._async_timeout, limits=self._limits)
            self._aloop = loop
        return self._aclient

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            retry_after = response.headers.get("retry-after", "")
            if retry_after.replace(".", "", 1).isdigit():
                return min(float(retry_after), self.max_backoff_s)
        return min(self.backoff_s * (2 ** attempt), self.max_backoff_s) * (0.5 + random.random() / 2)

    def _result(self, response: httpx.Response) -> Decision:
        if response.status_code != 200:
            raise StudentServiceError(f"decision service answered {response.status_code}: {response.text[:300]}",
                                      response.status_code)
        data: dict[str, Any] = response.json()
        self.version = data.get("policy_version", self.version)
        decided_by = "rule" if data.get("decided_by") == "rule" else "student"
        return Decision(int(data["agent_id"]), decided_by, float(data.get("latency_ms", 0.0)),
                        data.get("reason", ""), data.get("policy_version", ""))

    @staticmethod
    def _retryable(response: httpx.Response | None, exc: Exception | None) -> bool:
        if exc is not None:
            return isinstance(exc, httpx.TransportError)
        return response is not None and response.status_code in RETRY_STATUS

    # -- Policy -----------------------------------------------------------------------------------

    def _settle(self, attempt: int, response: httpx.Response | None, error: Exception | None, t0: float
                ) -> tuple[Decision | None, float]:
        """After one attempt: (the decision, 0) when done, (None, delay) to retry; raises on failure."""
        if error is None and response is not None and response.status_code == 200:
            return _stamp(self._result(response), t0), 0.0
        if attempt == self.retries or not self._retryable(response, error):
            if error is not None:
                raise StudentServiceError(f"decision service at {self.base_url} unreachable: {error}") from error
            return self._result(response), 0.0  # type: ignore[arg-type]  # raises with the status
        return None, self._delay(attempt, response)

    def decide(self, state: EpisodeState) -> Decision:
        t0, body = time.perf_counter(), state.to_dict()
        for attempt in range(self.retries + 1):
            response, error = None, None
            try:
                response = self._sync_client().post("/v1/decide", json=body)
            except httpx.HTTPError as exc:
                error = exc
            decision, delay = self._settle(attempt, response, error, t0)
            if decision is not None:
                return decision
            time.sleep(delay)
        raise AssertionError("unreachable")

    async def adecide(self, state: EpisodeState) -> Decision:
        t0, body = time.perf_counter(), state.to_dict()
        for attempt in range(self.retries + 1):
            response, error = None, None
            try:
                response = await self._async_client().post("/v1/decide", json=body)
            except httpx.HTTPError as exc:
                error = exc
            decision, delay = self._settle(attempt, response, error, t0)
            if decision is not None:
                return decision
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def send_feedback(self, record: EpisodeRecord) -> dict[str, Any]:
        """POST a finished episode to /v1/feedback (idempotent by episode_id); returns the answer."""
        response = self._sync_client().post("/v1/feedback", json=feedback_payload(record))
        if response.status_code != 200:
            raise StudentServiceError(f"feedback refused with {response.status_code}: {response.text[:300]}",
                                      response.status_code)
        return response.json()

    def _decide(self, state: EpisodeState) -> Decision:  # decide() is overridden; kept for the ABC
        return self.decide(state)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        aclient, loop = self._aclient, self._aloop
        self._aclient = self._aloop = None
        if aclient is None or loop is None or loop.is_closed():
            return  # its loop is gone, and its connections with it
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(aclient.aclose())
        elif not loop.is_running():
            loop.run_until_complete(aclient.aclose())


def _stamp(decision: Decision, t0: float) -> Decision:
    """Latency as the client saw it (network included); the service's own time is in `reason`-free data."""
    return Decision(decision.agent_id, decision.decided_by, (time.perf_counter() - t0) * 1000.0, decision.reason,
                    decision.policy_version)


def feedback_payload(record: EpisodeRecord) -> dict[str, Any]:
    """The /v1/feedback body for an episode record (the service rebuilds the record from it)."""
    steps = []
    for step in record.steps:
        row = {name: getattr(step, name) for name in FEEDBACK_STEP_FIELDS}
        row["state"] = json.loads(step.state_json)
        steps.append(row)
    return {"episode_id": record.episode_id, "llm_backend": record.llm_backend,
            "success_validator": record.success_validator, "success_oracle": record.success_oracle,
            "task_id": record.task_id, "family": record.family, "domain_name": record.domain_name,
            "policy_name": record.policy_name, "policy_version": record.policy_version,
            "final_plan": record.final_plan, "natural_language_plan": record.natural_language_plan,
            "seed": record.seed, "wall_s": record.wall_s, "steps": steps}


def student_factory(params: str, seed: int) -> Policy:
    """`student:URL` (e.g. student:http://127.0.0.1:8000); the key comes from HALO_SERVE_API_KEY."""
    url = params.strip()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"student policy needs the service URL, e.g. student:http://127.0.0.1:8000 (got {url!r})")
    return StudentHTTPPolicy(url)

"""A typed client of the decision service (`halo serve`), sync and async: decide, decide_batch,
feedback and the admin routes. It lives in rollout/ because the student policy uses it and rollout
never imports serve (the layering); `serve.client` re-exports it for production planners.

Retry rules: transport errors (connect, read, timeouts), 429 and 5xx (503 overload included) are
retried with exponential backoff and jitter, honouring Retry-After; every other 4xx (401, 403, 408,
409, 413, 422) is a permanent answer and raised at once as DecisionServiceError with its status and
the service's `{error, field, detail}`. Feedback is idempotent by episode_id, so retrying it is safe.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from rollout.policy import Decision

API_KEY_ENV = "HALO_SERVE_API_KEY"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class DecisionServiceError(RuntimeError):
    def __init__(self, message: str, status: int | None = None, error: str = "", field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.field = field


@dataclass(frozen=True)
class Answer:
    """One decision as the service gave it: every field of `rollout.policy.Decision`, and the agent's name."""

    agent_id: int
    agent_name: str
    decided_by: str  # "rule" or "model"
    policy_version: str
    latency_ms: float  # inside the service
    reason: str = ""
    dynamic_profile: str | None = None  # the dynamic agent's task profile
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Answer:
        profile = data.get("dynamic_profile")
        return cls(agent_id=int(data["agent_id"]), agent_name=str(data.get("agent_name", "")),
                   decided_by=str(data.get("decided_by", "")), policy_version=str(data.get("policy_version", "")),
                   latency_ms=float(data.get("latency_ms", 0.0)), reason=str(data.get("reason", "")),
                   dynamic_profile=None if profile is None else str(profile),
                   llm_calls=int(data.get("llm_calls", 0)), tokens_in=int(data.get("tokens_in", 0)),
                   tokens_out=int(data.get("tokens_out", 0)), cost_usd=float(data.get("cost_usd", 0.0)))

    def decision(self) -> Decision:
        """The Decision the service made, every field kept (the name is derived from the ID)."""
        return Decision.from_dict(asdict(self))


@dataclass
class RetryPolicy:
    retries: int = 4
    backoff_s: float = 0.1
    max_backoff_s: float = 5.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            retry_after = response.headers.get("retry-after", "")
            if retry_after.replace(".", "", 1).isdigit():
                return min(float(retry_after), self.max_backoff_s)
        return min(self.backoff_s * (2 ** attempt), self.max_backoff_s) * (0.5 + random.random() / 2)


def _error(response: httpx.Response, what: str) -> DecisionServiceError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    detail = body.get("detail", response.text[:300])
    return DecisionServiceError(f"{what}: the decision service answered {response.status_code}: {detail}",
                                response.status_code, str(body.get("error", "")), body.get("field"))


class _Base:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 10.0,
                 retry: RetryPolicy | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.timeout = timeout
        self.retry = retry or RetryPolicy()

    def _settle(self, attempt: int, response: httpx.Response | None, error: Exception | None,
                what: str) -> tuple[httpx.Response | None, float]:
        """(the 200 response, 0) when done, (None, delay) to retry; raises on a final failure."""
        if error is None and response is not None and response.status_code == 200:
            return response, 0.0
        transient = isinstance(error, httpx.TransportError) or (
            error is None and response is not None and response.status_code in RETRY_STATUS)
        if attempt < self.retry.retries and transient:
            return None, self.retry.delay(attempt, response)
        if error is not None:
            raise DecisionServiceError(f"{what}: decision service at {self.base_url} unreachable: {error}") from error
        assert response is not None
        raise _error(response, what)


class DecisionClient(_Base):
    """Blocking client (one connection pool); close() or use as a context manager."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 10.0,
                 retry: RetryPolicy | None = None) -> None:
        super().__init__(base_url, api_key, timeout, retry)
        self._client = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout)

    def _call(self, method: str, path: str, body: Any = None, sleep: Callable[[float], None] = time.sleep
              ) -> dict[str, Any]:
        for attempt in range(self.retry.retries + 1):
            response, error = None, None
            try:
                response = self._client.request(method, path, json=body)
            except httpx.HTTPError as exc:
                error = exc
            done, delay = self._settle(attempt, response, error, f"{method} {path}")
            if done is not None:
                return done.json()  # type: ignore[no-any-return]
            sleep(delay)
        raise AssertionError("unreachable")

    def decide(self, state: dict[str, Any]) -> Answer:
        return Answer.from_json(self._call("POST", "/v1/decide", state))

    def decide_batch(self, states: Sequence[dict[str, Any]]) -> list[Answer]:
        data = self._call("POST", "/v1/decide/batch", {"states": list(states)})
        return [Answer.from_json(d) for d in data["decisions"]]

    def feedback(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/feedback", payload)

    def model(self) -> dict[str, Any]:
        return self._call("GET", "/v1/admin/model")

    def deploy(self, model: str) -> dict[str, Any]:
        return self._call("POST", "/v1/admin/model", {"model": model})

    def rollback(self) -> dict[str, Any]:
        return self._call("POST", "/v1/admin/rollback")

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> DecisionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncDecisionClient(_Base):
    """Async client; an httpx.AsyncClient belongs to one event loop, so this one is (re)made per loop."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 10.0,
                 retry: RetryPolicy | None = None, pool: int = 64) -> None:
        super().__init__(base_url, api_key, timeout, retry)
        self._limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
        self._timeout = httpx.Timeout(timeout, pool=None)
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _pool(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = httpx.AsyncClient(base_url=self.base_url, headers=self.headers, timeout=self._timeout,
                                             limits=self._limits)
            self._loop = loop
        return self._client

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        for attempt in range(self.retry.retries + 1):
            response, error = None, None
            try:
                response = await self._pool().request(method, path, json=body)
            except httpx.HTTPError as exc:
                error = exc
            done, delay = self._settle(attempt, response, error, f"{method} {path}")
            if done is not None:
                return done.json()  # type: ignore[no-any-return]
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def decide(self, state: dict[str, Any]) -> Answer:
        return Answer.from_json(await self._call("POST", "/v1/decide", state))

    async def decide_batch(self, states: Sequence[dict[str, Any]]) -> list[Answer]:
        data = await self._call("POST", "/v1/decide/batch", {"states": list(states)})
        return [Answer.from_json(d) for d in data["decisions"]]

    async def feedback(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", "/v1/feedback", payload)

    async def model(self) -> dict[str, Any]:
        return await self._call("GET", "/v1/admin/model")

    async def deploy(self, model: str) -> dict[str, Any]:
        return await self._call("POST", "/v1/admin/model", {"model": model})

    async def rollback(self) -> dict[str, Any]:
        return await self._call("POST", "/v1/admin/rollback")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = self._loop = None

    def close(self) -> None:
        """Close from outside the client's loop (or from it: the close is then scheduled)."""
        client, loop = self._client, self._loop
        self._client = self._loop = None
        if client is None or loop is None or loop.is_closed():
            return  # its loop is gone, and its connections with it
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(client.aclose())
        elif not loop.is_running():
            loop.run_until_complete(client.aclose())

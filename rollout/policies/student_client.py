"""A typed client of the decision service (`halo serve`), sync and async: decide, decide_batch,
feedback and the admin routes. It lives in rollout/ because the student policy uses it and rollout
never imports serve (the layering); `serve.client` re-exports it for production planners.

Retry rules: transport errors (connect, read, timeouts), 429 and 5xx (503 overload included) are
retried (tenacity, with the shared waits of `rollout.llm.backoff`) with exponential backoff and jitter,
honouring Retry-After up to the policy's longest backoff; every other 4xx (401, 403, 408,
409, 413, 422) is a permanent answer and raised at once as DecisionServiceError with its status and
the service's `{error, field, detail}`. Feedback is idempotent by episode_id, so retrying it is safe.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from tenacity import AsyncRetrying, Retrying, retry_if_exception_type

from rollout.core.decision import Decision
from rollout.llm.backoff import RetryPolicy, retry_after_seconds
from solvers.errors import INFRA_REASON_LIMIT, HaloError

API_KEY_ENV = "HALO_SERVE_API_KEY"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class DecisionServiceError(HaloError, RuntimeError):
    def __init__(self, message: str, status: int | None = None, error: str = "", field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.field = field

    def infra_reason(self) -> str:
        """No answer, an overload or a server error past the retries is the service failing; any
        other 4xx is its verdict on the request, except 401/403 (a key it does not take: configuration)."""
        if self.status is None or self.status >= 500 or self.status in (401, 403, 429):
            return f"student:{self.status or 'unreachable'}: {self}"[:INFRA_REASON_LIMIT]
        return ""


@dataclass(frozen=True)
class Answer:
    """One decision as the service gave it: every field of `rollout.core.decision.Decision`, and the agent's name."""

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


# Transient failures retried 4 times (RetryPolicy: the one retry policy, rollout.llm.backoff).
DEFAULT_RETRY = RetryPolicy(retries=4, initial_backoff_s=0.1, max_backoff_s=5.0)


def _retry_options(policy: RetryPolicy) -> dict[str, Any]:
    """tenacity's settings for a call: transient failures (_Transient) retried as the policy says."""
    return {"retry": retry_if_exception_type(_Transient), "stop": policy.stop(), "wait": policy.wait()}


class _Transient(Exception):
    """An attempt worth retrying: a transport error, or a 429/5xx answer (with the Retry-After it gave)."""

    def __init__(self, response: httpx.Response | None, error: Exception | None) -> None:
        super().__init__(str(error or response))
        self.response, self.error = response, error
        self.retry_after = None if response is None else retry_after_seconds(response.headers)


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
        self.retry = retry or DEFAULT_RETRY

    def _check(self, response: httpx.Response | None, error: Exception | None, what: str) -> dict[str, Any]:
        """The body of a 200; raises _Transient to retry, DecisionServiceError on a permanent failure."""
        if error is None and response is not None and response.status_code == 200:
            return response.json()  # type: ignore[no-any-return]
        if isinstance(error, httpx.TransportError) or (
                error is None and response is not None and response.status_code in RETRY_STATUS):
            raise _Transient(response, error)
        raise self._failure(response, error, what) from error

    def _failure(self, response: httpx.Response | None, error: Exception | None, what: str) -> DecisionServiceError:
        if error is not None:
            return DecisionServiceError(f"{what}: decision service at {self.base_url} unreachable: {error}")
        assert response is not None
        return _error(response, what)


class DecisionClient(_Base):
    """Blocking client (one connection pool); close() or use as a context manager."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 10.0,
                 retry: RetryPolicy | None = None) -> None:
        super().__init__(base_url, api_key, timeout, retry)
        self._client = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout)

    def _call(self, method: str, path: str, body: Any = None, sleep: Callable[[float], None] = time.sleep
              ) -> dict[str, Any]:
        what = f"{method} {path}"

        def attempt() -> dict[str, Any]:
            response, error = None, None
            try:
                response = self._client.request(method, path, json=body)
            except httpx.HTTPError as exc:
                error = exc
            return self._check(response, error, what)

        try:
            return Retrying(sleep=sleep, reraise=True, **_retry_options(self.retry))(attempt)
        except _Transient as last:
            raise self._failure(last.response, last.error, what) from last.error

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
        what = f"{method} {path}"

        async def attempt() -> dict[str, Any]:
            response, error = None, None
            try:
                response = await self._pool().request(method, path, json=body)
            except httpx.HTTPError as exc:
                error = exc
            return self._check(response, error, what)

        try:
            return await AsyncRetrying(reraise=True, **_retry_options(self.retry))(attempt)
        except _Transient as last:
            raise self._failure(last.response, last.error, what) from last.error

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

"""An async client for any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ray Serve LLM).

It implements `rollout.agents.base.ChatBackend`: `await client.chat(messages, purpose=...)`
returns a `ChatReply` (text, tokens, latency, cost) or raises a typed `LLMError` after bounded
retries. Retries (tenacity, with the shared waits of `rollout.llm.backoff`) use exponential backoff with
jitter on timeouts, 429 (Retry-After honoured), 5xx and connection errors; 4xx other than 429 and
malformed bodies are not retried. A semaphore
caps the requests in flight per client, and its one connection pool is bounded to the same
number; every call is recorded (`records`, `drain_records`). Each attempt also passes the
process's LLM gate (`rollout.llm.budget`): the job-wide RPM/TPM/concurrency budget, when set.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import openai
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from rollout.llm.backoff import retry_after_seconds, stop_if_retry_after_over, wait_equal_jitter, wait_retry_after
from rollout.llm.budget import LLMGate, estimate_tokens, llm_gate
from rollout.llm.errors import (
    LLMBadResponseError,
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
)
from rollout.llm.records import CallLedger, CallRecord, ChatReply, LLMConfig, prompt_sha256

RETRYABLE = (LLMTimeoutError, LLMConnectionError, LLMServerError, LLMRateLimitError)


class OpenAIChatClient(CallLedger):
    def __init__(self, config: LLMConfig, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 rng: random.Random | None = None) -> None:
        if config.max_attempts < 1 or config.max_concurrency < 1:
            raise ValueError("max_attempts and max_concurrency must be at least 1")
        self.config = config
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._records: list[CallRecord] = []
        # The SDK client and the semaphore belong to one event loop; rebuilt when the loop changes
        # (e.g. a synchronous caller running asyncio.run per decision).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sdk: openai.AsyncOpenAI | None = None
        self._sem: asyncio.Semaphore | None = None

    # --- calls -----------------------------------------------------------------------------

    def _bind(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._sdk is None or self._sem is None:
            self._loop = loop
            limits = httpx.Limits(max_connections=self.config.max_concurrency,
                                  max_keepalive_connections=self.config.max_concurrency)
            self._sdk = openai.AsyncOpenAI(base_url=self.config.base_url, api_key=self.config.api_key,
                                           timeout=self.config.timeout_s, max_retries=0,
                                           http_client=httpx.AsyncClient(limits=limits,
                                                                         timeout=self.config.timeout_s))
            self._sem = asyncio.Semaphore(self.config.max_concurrency)
        return self._sdk, self._sem

    async def chat(self, messages: list[dict[str, str]], *, purpose: str = "",
                   extra_body: dict[str, Any] | None = None) -> ChatReply:
        cfg = self.config
        sdk, sem = self._bind()
        gate = llm_gate()
        estimate = estimate_tokens(messages, cfg.max_tokens)
        started, t0 = time.time(), time.perf_counter()
        sha = prompt_sha256(messages)
        attempt = 0
        try:
            async for trial in self._retrying():
                with trial:
                    attempt = trial.retry_state.attempt_number
                    text, tin, tout, model = await self._attempt(sdk, sem, gate, estimate, messages, extra_body,
                                                                 attempt)
        except LLMError as exc:
            self._record(purpose, sha, 0, 0, t0, started, exc.kind, attempt, str(exc))
            raise
        latency = (time.perf_counter() - t0) * 1000.0
        cost = cfg.prices.cost(cfg.model, tin, tout)
        self._record(purpose, sha, tin, tout, t0, started, "ok", attempt, "", cost)
        return ChatReply(text, tin, tout, latency, cost, model, attempt)

    def _retrying(self) -> AsyncRetrying:
        """Timeouts, connection errors, 5xx and 429 are retried (a 429's Retry-After honoured, a too long one
        fails at once); other errors and the last attempt's are raised as they are."""
        cfg = self.config
        backoff = wait_equal_jitter(cfg.backoff_base_s, cfg.backoff_max_s, self._rng)
        return AsyncRetrying(
            retry=retry_if_exception_type(RETRYABLE),
            stop=stop_after_attempt(cfg.max_attempts) | stop_if_retry_after_over(cfg.max_retry_after_s),
            wait=wait_retry_after(backoff, cap_s=cfg.max_retry_after_s, jitter_s=0.1 * cfg.backoff_base_s,
                                  rng=self._rng),
            sleep=self._sleep, reraise=True)

    async def _attempt(self, sdk: openai.AsyncOpenAI, sem: asyncio.Semaphore, gate: LLMGate, estimate: int,
                       messages: list[dict[str, str]], extra_body: dict[str, Any] | None,
                       attempt: int) -> tuple[str, int, int, str]:
        try:
            async with sem, gate.call(estimate) as call:
                call.tokens = 0  # a failed attempt is taken to cost nothing
                text, tin, tout, model = await self._once(sdk, messages, extra_body)
                call.tokens = tin + tout if tin + tout else estimate
        except LLMError as exc:
            exc.attempts = attempt
            if isinstance(exc, LLMRateLimitError):
                gate.rate_limited(getattr(exc, "retry_after", None))
            raise
        return text, tin, tout, model

    async def _once(self, sdk: openai.AsyncOpenAI, messages: list[dict[str, str]],
                    extra_body: dict[str, Any] | None = None) -> tuple[str, int, int, str]:
        cfg = self.config
        kwargs: dict[str, Any] = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature}
        if cfg.max_tokens is not None:
            kwargs["max_tokens"] = cfg.max_tokens
        if cfg.extra_body or extra_body:
            kwargs["extra_body"] = {**cfg.extra_body, **(extra_body or {})}
        try:
            raw = await sdk.chat.completions.with_raw_response.create(**kwargs)
            body_text = raw.text
        except openai.APITimeoutError:
            raise LLMTimeoutError(f"no answer within {cfg.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            raise LLMConnectionError(f"connection failed: {exc}") from None
        except openai.RateLimitError as exc:
            err = LLMRateLimitError(f"rate limited (429): {_short(exc)}", status=429)
            err.retry_after = retry_after_seconds(exc.response.headers)  # type: ignore[attr-defined]
            raise err from None
        except openai.APIStatusError as exc:
            if exc.status_code >= 500:
                raise LLMServerError(f"server error {exc.status_code}: {_short(exc)}",
                                     status=exc.status_code) from None
            raise LLMRequestError(f"request rejected {exc.status_code}: {_short(exc)}",
                                  status=exc.status_code) from None
        except openai.OpenAIError as exc:  # response validation and other SDK-level failures
            raise LLMBadResponseError(f"unusable response: {exc}") from None
        return _parse_completion(body_text, cfg.model)

    def _record(self, purpose: str, sha: str, tin: int, tout: int, t0: float, started: float,
                status: str, attempts: int, error: str, cost: float = 0.0) -> None:
        self._records.append(CallRecord(purpose, self.config.model, sha, tin, tout,
                                        (time.perf_counter() - t0) * 1000.0, cost, status, attempts,
                                        started, error))

    async def aclose(self) -> None:
        if self._sdk is not None and self._loop is asyncio.get_running_loop():
            await self._sdk.close()
        self._sdk = None


def _short(exc: openai.APIStatusError) -> str:
    try:
        body = exc.response.json()
        return str(body.get("error", {}).get("message", body))[:200]
    except (ValueError, AttributeError):
        return exc.response.text[:200]


def _parse_completion(body_text: str, model: str) -> tuple[str, int, int, str]:
    try:
        body = json.loads(body_text)
    except (json.JSONDecodeError, TypeError):
        raise LLMBadResponseError(f"response body is not JSON: {body_text[:120]!r}") from None
    try:
        choice = body["choices"][0]
        content = choice["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise LLMBadResponseError(f"response is not a chat completion: {body_text[:120]!r}") from None
    if not isinstance(content, str):
        raise LLMBadResponseError("response message has no text content")
    usage = body.get("usage") or {}
    try:
        tin, tout = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    except (TypeError, ValueError):
        tin = tout = 0
    return content, tin, tout, str(body.get("model") or model)

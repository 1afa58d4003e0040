"""The one local server speaking the OpenAI chat-completions protocol that tests and benchmarks use.

It is the test double for a frontier LLM API (the real thing cannot be reached from the
development machines). One asyncio server (aiohttp, one event loop in its own thread) holds
thousands of open requests, so it serves both kinds of test:

- scripted failures, for the client's retries and error handling:

      from tests.fake_openai import FakeOpenAI, Reply

      with FakeOpenAI() as server:                    # 127.0.0.1, free port, own thread
          server.script(Reply.status(429, retry_after=0.2), Reply.text("<domain>...</domain>"))
          client = AsyncOpenAI(base_url=server.base_url, api_key="test")
          ...
          server.requests        # every request body received (parsed JSON)
          server.max_in_flight   # the most requests handled at the same time

  Scripted replies are used first-in first-out, one per request; when the script is empty the
  `default` callable answers (by default: "ok").

- the LLM-latency-bound regime, with a provider's organisation-wide limits:

      with FakeOpenAI.simulated(rpm=1200, latency_ms=50) as server:
          server.base_url, server.stats()   # also at GET /stats

  Each answer comes after the latency the simulated world asks for (`"halo_sim": {"latency_ms": ...,
  "prompt_tokens": ..., "completion_tokens": ...}` in the request body) or `latency_ms` of its own.
  Limits are token buckets refilled continuously at rpm/60 (tpm/60) per second holding `burst_s`
  seconds of the rate; a request over a limit gets a 429 with an OpenAI-style body and, unless
  `retry_after=False`, a Retry-After header (seconds until the bucket has room again).

As a process: `python tests/fake_openai.py [--rpm 1200] [--tpm 2000000] [--latency-ms 0] [--port 0]`
serves the simulated responder and prints `listening on <base_url>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Responder = Callable[[dict[str, Any]], "Reply"]


@dataclass(frozen=True)
class Reply:
    """One answer. Build with the class methods."""

    kind: str  # text | status | malformed | wrong_shape | drop
    content: str = ""
    code: int = 200  # HTTP status for kind == "status"
    delay_s: float = 0.0
    retry_after: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, content: str, *, delay_s: float = 0.0, prompt_tokens: int | None = None,
             completion_tokens: int | None = None) -> Reply:
        """A normal 200 chat completion with `content` as the assistant message."""
        return cls("text", content, delay_s=delay_s, prompt_tokens=prompt_tokens,
                   completion_tokens=completion_tokens)

    @classmethod
    def slow(cls, content: str, delay_s: float) -> Reply:
        return cls.text(content, delay_s=delay_s)

    @classmethod
    def status(cls, code: int, *, retry_after: float | None = None, delay_s: float = 0.0) -> Reply:
        """An error status (429, 500, 503, 400, ...) with an OpenAI-style error body."""
        return cls("status", code=code, retry_after=retry_after, delay_s=delay_s)

    @classmethod
    def malformed(cls) -> Reply:
        """A 200 whose body is not valid JSON."""
        return cls("malformed")

    @classmethod
    def wrong_shape(cls) -> Reply:
        """A 200 JSON body that is not a chat completion (no `choices`)."""
        return cls("wrong_shape")

    @classmethod
    def drop(cls) -> Reply:
        """Close the connection without answering."""
        return cls("drop")


def _count_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content", "")).split()) for m in messages) + 3 * len(messages)


def simulated(latency_ms: float = 0.0) -> Responder:
    """Answers "ok" after the latency (and with the token counts) the request's `halo_sim` asks for;
    without one, after `latency_ms`, counting a token per 4 prompt characters and 16 completion tokens."""

    def answer(body: dict[str, Any]) -> Reply:
        sim = body.get("halo_sim") or {}
        prompt = int(sim.get("prompt_tokens") or sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4)
        return Reply.text("ok", delay_s=float(sim.get("latency_ms", latency_ms)) / 1000.0, prompt_tokens=prompt,
                          completion_tokens=int(sim.get("completion_tokens") or 16))

    return answer


@dataclass
class _Bucket:
    rate: float
    capacity: float
    level: float
    stamp: float = field(default_factory=time.monotonic)

    @classmethod
    def per_minute(cls, per_min: float | None, burst_s: float) -> _Bucket | None:
        return cls(per_min / 60, per_min / 60 * burst_s, per_min / 60 * burst_s) if per_min else None

    def take(self, amount: float) -> float:
        """0.0 if taken; otherwise seconds until `amount` would fit."""
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.level >= min(amount, self.capacity):
            self.level -= amount
            return 0.0
        return (min(amount, self.capacity) - self.level) / self.rate


@dataclass
class ServerStats:
    requests: int = 0  # answered 200 with a completion
    rate_limited: int = 0  # answered 429 by the rate limits
    tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    first_at: float | None = None
    last_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class FakeOpenAI:
    def __init__(self, default: Responder | None = None, host: str = "127.0.0.1", port: int = 0, *,
                 rpm: float | None = None, tpm: float | None = None, burst_s: float = 5.0,
                 retry_after: bool = True) -> None:
        self.default = default or (lambda body: Reply.text("ok"))
        self.retry_after = retry_after
        self._req = _Bucket.per_minute(rpm, burst_s)
        self._tok = _Bucket.per_minute(tpm, burst_s)
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.counts = ServerStats()
        # Bound now, so that base_url is known (and the port held) before the server starts.
        self._sock = socket.create_server((host, port), backlog=4096)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def simulated(cls, *, rpm: float | None = None, tpm: float | None = None, burst_s: float = 5.0,
                  latency_ms: float = 0.0, retry_after: bool = True, host: str = "127.0.0.1",
                  port: int = 0) -> FakeOpenAI:
        """A provider in the LLM-latency-bound regime: `simulated` answers under rpm/tpm limits."""
        return cls(simulated(latency_ms), host, port, rpm=rpm, tpm=tpm, burst_s=burst_s, retry_after=retry_after)

    # --- control ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.counts.max_in_flight = 0

    @property
    def pending(self) -> int:
        return len(self._script)

    @property
    def in_flight(self) -> int:
        return self.counts.in_flight

    @property
    def max_in_flight(self) -> int:
        return self.counts.max_in_flight

    def stats(self) -> dict[str, Any]:
        return self.counts.as_dict()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/{path:.*}", self._post)
        return app

    async def start_async(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()

    def start(self) -> FakeOpenAI:
        started = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start_async())
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="fake-openai", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the fake OpenAI server did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is not None:
            if self._runner is not None:
                asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(10)
            loop.close()
            self._loop = None
        self._sock.close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- serving ---------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> tuple[Reply, bool]:
        """The reply for this request, and whether it came from the script."""
        with self._lock:
            self.requests.append(body)
            if self._script:
                return self._script.popleft(), True
        return self.default(body), False

    def _admit(self, tokens: int) -> float:
        """0.0 when the rate limits let the request through, else seconds until they would."""
        waits = []
        if self._req is not None:
            waits.append(self._req.take(1))
        if self._tok is not None and not any(waits):
            waits.append(self._tok.take(tokens))
            if waits[-1] and self._req is not None:
                self._req.level += 1  # refused: the request is not counted
        return max(waits, default=0.0)

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _post(self, request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.read() or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "request body is not JSON", "invalid_request")
        if not request.path.rstrip("/").endswith("/chat/completions"):
            return _error(404, f"no route {request.path}", "not_found")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "body must be a chat completion request", "invalid_request_error")
        c = self.counts
        c.in_flight += 1
        c.max_in_flight = max(c.max_in_flight, c.in_flight)
        try:
            return await self._answer(request, body)
        finally:
            c.in_flight -= 1

    async def _answer(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        reply, scripted = self._next_reply(body)
        prompt = reply.prompt_tokens if reply.prompt_tokens is not None else _count_tokens(body["messages"])
        completion = (reply.completion_tokens if reply.completion_tokens is not None
                      else len(reply.content.split()) + 1)
        wait = self._admit(prompt + completion)
        if wait > 0:
            if scripted:  # refused before its turn: the scripted reply answers the next request
                with self._lock:
                    self._script.appendleft(reply)
            self.counts.rate_limited += 1
            headers = {"retry-after": f"{wait:.3f}"} if self.retry_after else {}
            return _error(429, "Rate limit reached for requests", "requests", headers, code="rate_limit_exceeded")
        if reply.kind == "text" and self.counts.first_at is None:
            self.counts.first_at = time.monotonic()
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.kind == "drop":
            if request.transport is not None:
                request.transport.close()
            return web.Response()  # never sent: the connection is gone
        if reply.kind == "malformed":
            return web.Response(body=b'{"id": "x", "choices": [ {"message": ', content_type="application/json")
        if reply.kind == "wrong_shape":
            return web.json_response({"id": "x", "object": "chat.completion", "result": "no choices here"})
        if reply.kind == "status":
            headers = dict(reply.headers)
            if reply.retry_after is not None:
                headers["Retry-After"] = f"{reply.retry_after:g}"
            kind = "rate_limit_exceeded" if reply.code == 429 else "server_error"
            return _error(reply.code, f"scripted {reply.code}", kind, headers)
        c = self.counts
        c.requests += 1
        c.tokens += prompt + completion
        c.last_at = time.monotonic()
        return web.json_response({
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.content}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }, headers=reply.headers)


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None,
           code: str | None = None) -> web.Response:
    error: dict[str, Any] = {"message": message, "type": kind}
    if code is not None:
        error["code"] = code
    return web.json_response({"error": error}, status=status, headers=headers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rpm", type=float)
    parser.add_argument("--tpm", type=float)
    parser.add_argument("--burst-s", type=float, default=5.0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--no-retry-after", action="store_true")
    args = parser.parse_args()
    server = FakeOpenAI.simulated(rpm=args.rpm, tpm=args.tpm, burst_s=args.burst_s, latency_ms=args.latency_ms,
                                  retry_after=not args.no_retry_after, host=args.host, port=args.port)

    async def run() -> None:
        await server.start_async()
        print(f"listening on {server.base_url}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()

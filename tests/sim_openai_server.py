"""An asyncio OpenAI-protocol chat server that answers after a simulated latency and enforces
requests/min and tokens/min limits with 429s, like a provider's organisation-wide limits.

It is the test double for a frontier LLM API in the LLM-latency-bound regime: it holds
thousands of open requests (aiohttp, one event loop), answers each after the latency the
simulated world asks for (`"halo_sim": {"latency_ms": ..., "prompt_tokens": ..., "completion_tokens": ...}`
in the request body) or `latency_ms` of its own, and keeps counts at `GET /stats`.

    with SimOpenAIServer(rpm=1200) as server:      # in-process: 127.0.0.1, free port, own thread
        server.base_url, server.stats()
    python tests/sim_openai_server.py --rpm 1200 --tpm 2000000   # as a process: prints "listening on URL"

Limits are token buckets refilled continuously at rpm/60 per second holding `burst_s` seconds
of the rate; a request over a limit gets a 429 with an OpenAI-style body and, unless
`retry_after=False`, a Retry-After header (seconds until the bucket has room again).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class _Bucket:
    rate: float
    capacity: float
    level: float
    stamp: float = field(default_factory=time.monotonic)

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
    requests: int = 0  # answered 200
    rate_limited: int = 0  # answered 429
    tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    first_at: float | None = None
    last_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SimOpenAIServer:
    def __init__(self, *, rpm: float | None = None, tpm: float | None = None, burst_s: float = 5.0,
                 latency_ms: float = 0.0, retry_after: bool = True, host: str = "127.0.0.1", port: int = 0) -> None:
        self.rpm, self.tpm, self.burst_s = rpm, tpm, burst_s
        self.latency_ms = latency_ms
        self.retry_after = retry_after
        self.host, self.port = host, port
        self._req = _Bucket(rpm / 60, rpm / 60 * burst_s, rpm / 60 * burst_s) if rpm else None
        self._tok = _Bucket(tpm / 60, tpm / 60 * burst_s, tpm / 60 * burst_s) if tpm else None
        self.counts = ServerStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()

    # ---- HTTP --------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/stats", self._stats)
        return app

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.counts.as_dict())

    async def _chat(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": {"message": "body must be a chat completion request",
                                                "type": "invalid_request_error"}}, status=400)
        sim = body.get("halo_sim") or {}
        prompt_tokens = int(sim.get("prompt_tokens") or sum(len(str(m.get("content", ""))) for m in messages) // 4)
        completion_tokens = int(sim.get("completion_tokens") or 16)
        wait = self._admit(prompt_tokens + completion_tokens)
        if wait > 0:
            self.counts.rate_limited += 1
            headers = {"retry-after": f"{wait:.3f}"} if self.retry_after else {}
            return web.json_response({"error": {"message": "Rate limit reached for requests", "type": "requests",
                                                "code": "rate_limit_exceeded"}}, status=429, headers=headers)
        c = self.counts
        c.in_flight += 1
        c.max_in_flight = max(c.max_in_flight, c.in_flight)
        now = time.monotonic()
        c.first_at = now if c.first_at is None else c.first_at
        try:
            await asyncio.sleep(float(sim.get("latency_ms", self.latency_ms)) / 1000.0)
        finally:
            c.in_flight -= 1
        c.requests += 1
        c.tokens += prompt_tokens + completion_tokens
        c.last_at = time.monotonic()
        return web.json_response({
            "id": f"chatcmpl-sim-{c.requests}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "sim"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}})

    def _admit(self, tokens: int) -> float:
        waits = []
        if self._req is not None:
            waits.append(self._req.take(1))
        if self._tok is not None and not any(waits):
            waits.append(self._tok.take(tokens))
            if waits[-1] and self._req is not None:
                self._req.level += 1  # refused: the request is not counted
        return max(waits, default=0.0)

    # ---- lifecycle -----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return self.counts.as_dict()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start_async(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def __enter__(self) -> SimOpenAIServer:
        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start_async())
            self._started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="sim-openai", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the simulated OpenAI server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is None:
            return
        loop = self._loop
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rpm", type=float)
    parser.add_argument("--tpm", type=float)
    parser.add_argument("--burst-s", type=float, default=5.0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--no-retry-after", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = SimOpenAIServer(rpm=args.rpm, tpm=args.tpm, burst_s=args.burst_s, latency_ms=args.latency_ms,
                             retry_after=not args.no_retry_after, port=args.port)

    async def run() -> None:
        await server.start_async()
        print(f"listening on {server.base_url}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()

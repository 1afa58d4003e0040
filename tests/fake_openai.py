"""A local HTTP server speaking the OpenAI chat-completions protocol, with scriptable failures.

It is the test double for a frontier LLM API (the real thing cannot be reached from the
development machines). Use it in-process:

    from tests.fake_openai import FakeOpenAI, Reply

    with FakeOpenAI() as server:                       # 127.0.0.1, free port, own thread
        server.script(Reply.status(429, retry_after=0.2), Reply.text("<domain>...</domain>"))
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        ...
        server.requests        # every request body received (parsed JSON)
        server.max_in_flight   # the most requests handled at the same time

Scripted replies are used first-in first-out, one per request; when the script is empty the
`default` callable answers (by default: "ok", or use `Reply.echo()` style responders). Or run
it as a process: `python tests/fake_openai.py --port 0` prints `listening on <base_url>`.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build with the class methods."""

    kind: str  # text | status | malformed | drop
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


class FakeOpenAI:
    def __init__(self, default: Callable[[dict[str, Any]], Reply] | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.default = default or (lambda body: Reply.text("ok"))
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- control ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.max_in_flight = 0

    @property
    def pending(self) -> int:
        return len(self._script)

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- serving ---------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._script:
                return self._script.popleft()
        return self.default(body)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def do_POST(self) -> None:  # noqa: N802  (http.server naming)
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "request body is not JSON", "type": "invalid_request"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server._next_reply(body)
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                    self._answer(reply, body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, reply: Reply, body: dict[str, Any]) -> None:
                if reply.kind == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if reply.kind == "malformed":
                    self._send_raw(200, b'{"id": "x", "choices": [ {"message": ', "application/json")
                    return
                if reply.kind == "wrong_shape":
                    self._send(200, {"id": "x", "object": "chat.completion", "result": "no choices here"})
                    return
                if reply.kind == "status":
                    headers = dict(reply.headers)
                    if reply.retry_after is not None:
                        headers["Retry-After"] = f"{reply.retry_after:g}"
                    kind = "rate_limit_exceeded" if reply.code == 429 else "server_error"
                    self._send(reply.code, {"error": {"message": f"scripted {reply.code}", "type": kind}},
                               headers)
                    return
                messages = body.get("messages", [])
                prompt = reply.prompt_tokens if reply.prompt_tokens is not None else _count_tokens(messages)
                completion = (reply.completion_tokens if reply.completion_tokens is not None
                              else len(reply.content.split()) + 1)
                self._send(200, {
                    "id": f"chatcmpl-fake-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake-model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.content}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion},
                })

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to do

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI chat endpoint (answers 'ok').")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = FakeOpenAI(host=args.host, port=args.port)
    print(f"listening on {server.base_url}", flush=True)
    try:
        server._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()


if __name__ == "__main__":
    main()

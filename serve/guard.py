"""An ASGI guard in front of the routes: bearer-token API keys and a request body size limit.

Pure ASGI (not BaseHTTPMiddleware) because it sits on every decision's path; it answers 401/413
itself and never lets an oversized body reach the JSON parser.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


class GuardSettings:
    def __init__(self, api_keys: Iterable[str] = (), max_body_bytes: int = 1_048_576,
                 metrics_public: bool = True, observe: Callable[[str, int, float], None] | None = None) -> None:
        self.api_keys = [k.encode() for k in api_keys]
        self.max_body_bytes = max_body_bytes
        self.open_paths = OPEN_PATHS | ({"/metrics"} if metrics_public else set())
        # Called once per request with (path, status code, seconds inside the replica).
        self.observe = observe

    def authorized(self, header: bytes | None) -> bool:
        if not self.api_keys:
            return True
        if not header or header[:7].lower() != b"bearer ":
            return False
        token = header[7:].strip()
        # Compare against every key so timing does not reveal which prefix matched.
        return any([hmac.compare_digest(token, key) for key in self.api_keys])


class ActiveGuard:
    """The guard settings of the replica living in this process (Serve runs one per process).

    A class attribute, not a module global: Serve pickles the deployment class by value, so its
    methods would write a copied globals dict, while classes of importable modules travel by
    reference and stay shared with the middleware."""

    settings: GuardSettings | None = None


class GuardMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        settings = ActiveGuard.settings
        if scope["type"] != "http" or settings is None:
            await self.app(scope, receive, send)
            return
        path = _route_path(scope)
        if settings.observe is None:
            await self._guarded(scope, receive, send, settings, path)
            return
        t0 = time.perf_counter()
        status = 500

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, observed_send, settings, path)
        finally:
            settings.observe(path, status, time.perf_counter() - t0)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, settings: GuardSettings,
                       path: str) -> None:
        headers = dict(scope.get("headers") or [])
        if path not in settings.open_paths and not settings.authorized(headers.get(b"authorization")):
            await _reject(send, 401, "unauthorized", "a valid API key is required (Authorization: Bearer KEY)",
                          [(b"www-authenticate", b'Bearer realm="halo"')])
            return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                too_big = int(length) > settings.max_body_bytes
            except ValueError:
                await _reject(send, 400, "bad_request", "invalid Content-Length header")
                return
            if too_big:
                await _reject(send, 413, "too_large", f"request body over {settings.max_body_bytes} bytes")
                return
            await self.app(scope, receive, send)
            return
        # No Content-Length (chunked): read up to the limit, then replay the body to the app.
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > settings.max_body_bytes:
                await _reject(send, 413, "too_large", f"request body over {settings.max_body_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _route_path(scope: Scope) -> str:
    path = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):] or "/"
    return path


async def _reject(send: Send, status: int, kind: str, detail: str,
                  extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": kind, "detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

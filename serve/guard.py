"""An ASGI guard in front of the routes: roles and API keys, per-client limits, body limits and
timeouts, request IDs, and one JSON check of every body at the edge.

Pure ASGI (not BaseHTTPMiddleware) because it sits on every decision's path. It answers every
refusal itself in the documented shape `{"error", "field", "detail"}`, reads the whole body (with a
deadline and a size cap) before any route runs, and refuses bodies that the routes or the store
could not handle: invalid UTF-8, nesting deeper than `MAX_JSON_DEPTH`, strings that do not encode
(lone surrogates), integers outside int64, NaN/Infinity.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("halo.serve")

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
ADMIN_PREFIX = "/v1/admin/"
MIN_KEY_CHARS = 16
MAX_JSON_DEPTH = 32
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Status used in metrics for a client that went away before its answer (nginx's convention).
CLIENT_CLOSED = 499
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class KeyConfigError(ValueError):
    """A configured API key that cannot be used (too short, empty name)."""


def parse_keys(entries: Iterable[str], source: str) -> dict[str, str]:
    """`{key: name}` from entries `KEY` or `NAME=KEY`; an unnamed key is named by its hash prefix,
    so metrics and logs never carry a key. Keys under MIN_KEY_CHARS are refused."""
    out: dict[str, str] = {}
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        name, sep, key = entry.partition("=")
        if not sep:
            name, key = "", entry
        if len(key) < MIN_KEY_CHARS:
            raise KeyConfigError(f"{source}: every API key must be at least {MIN_KEY_CHARS} characters")
        out[key] = name.strip() or "key-" + hashlib.sha256(key.encode()).hexdigest()[:8]
    return out


@dataclass
class KeyRing:
    """Decision and admin keys; `key_file` (lines `decision NAME=KEY` / `admin NAME=KEY`) is re-read
    when it changes, so keys rotate without a restart. A file that does not parse keeps the old keys."""

    decision: dict[str, str] = field(default_factory=dict)
    admin: dict[str, str] = field(default_factory=dict)
    key_file: str = ""
    _file_keys: tuple[dict[str, str], dict[str, str]] = field(default_factory=lambda: ({}, {}))
    _mtime: float = -1.0
    _checked: float = 0.0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if self.key_file:
            self._file_keys = read_key_file(self.key_file)
            self._mtime = _mtime(self.key_file)

    def _refresh(self) -> None:
        now = time.monotonic()
        if not self.key_file or now - self._checked < 1.0:
            return
        with self._lock:
            self._checked = now
            mtime = _mtime(self.key_file)
            if mtime == self._mtime:
                return
            try:
                self._file_keys = read_key_file(self.key_file)
                log.warning("API keys re-read from %s", self.key_file)
            except (OSError, ValueError) as exc:
                log.error("API key file %s not re-read, old keys kept: %s", self.key_file, exc)
            self._mtime = mtime

    @property
    def enabled(self) -> bool:
        self._refresh()
        return bool(self.decision or self.admin or any(self._file_keys))

    def lookup(self, token: bytes) -> tuple[str, str] | None:
        """(role, key name) of a presented token, or None."""
        self._refresh()
        found: tuple[str, str] | None = None
        file_decision, file_admin = self._file_keys
        # Compare against every key so timing does not reveal which one matched.
        for role, keys in (("admin", self.admin), ("admin", file_admin), ("decision", self.decision),
                           ("decision", file_decision)):
            for key, name in keys.items():
                if hmac.compare_digest(token, key.encode()) and found is None:
                    found = (role, name)
        return found


def read_key_file(path: str) -> tuple[dict[str, str], dict[str, str]]:
    decision: list[str] = []
    admin: list[str] = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        role, _, entry = line.partition(" ")
        if role not in ("decision", "admin") or not entry.strip():
            raise KeyConfigError(f"{path}:{n}: want `decision NAME=KEY` or `admin NAME=KEY`")
        (admin if role == "admin" else decision).append(entry)
    return parse_keys(decision, path), parse_keys(admin, path)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime_ns / 1e9
    except OSError:
        return -2.0


class RateLimiter:
    """A token bucket per key name: `rate` requests/s sustained, bursts of `burst`."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self._buckets: dict[str, tuple[float, float]] = {}

    def acquire(self, who: str) -> float:
        """0 when allowed, else the seconds until a token is free."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        tokens, at = self._buckets.get(who, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            self._buckets[who] = (tokens - 1.0, now)
            return 0.0
        self._buckets[who] = (tokens, now)
        return (1.0 - tokens) / self.rate


@dataclass
class GuardSettings:
    keys: KeyRing = field(default_factory=KeyRing)
    max_body_bytes: int = 1_048_576
    metrics_public: bool = True
    # Called once per request with (path, status, seconds inside the replica, error kind or None);
    # status 499 = the client went away. Each refusal is counted there and only there.
    observe: Callable[[str, int, float, str | None], None] | None = None
    body_timeout_s: float = 10.0
    max_inflight_per_client: int = 16
    rate_limit_rps: float = 0.0
    rate_limit_burst: float = 0.0

    def __post_init__(self) -> None:
        self.open_paths = OPEN_PATHS | ({"/metrics"} if self.metrics_public else set())
        self.limiter = RateLimiter(self.rate_limit_rps, self.rate_limit_burst or self.rate_limit_rps)
        self.inflight: dict[str, int] = {}


class ActiveGuard:
    """The guard settings of the replica living in this process (Serve runs one per process).

    A class attribute, not a module global: Serve pickles the deployment class by value, so its
    methods would write a copied globals dict, while classes of importable modules travel by
    reference and stay shared with the middleware."""

    settings: GuardSettings | None = None


class Refusal(Exception):
    def __init__(self, status: int, kind: str, detail: str, field_name: str | None = None,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(detail)
        self.status, self.kind, self.detail, self.field_name = status, kind, detail, field_name
        self.headers = headers or []


class ClientGone(Exception):
    pass


class GuardMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        settings = ActiveGuard.settings
        if scope["type"] != "http" or settings is None:
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        path = _route_path(scope)
        headers = dict(scope.get("headers") or [])
        # Serve's own middleware (proxy and direct ingress) sets X-Request-ID and echoes it in the
        # answer; the fast ingress has none, so the guard adds it to any answer that lacks it.
        request_id = _header_text(headers.get(b"x-request-id"), _REQUEST_ID) or os.urandom(16).hex()
        trace = _header_text(headers.get(b"traceparent"), _TRACEPARENT)
        state = scope.setdefault("state", {})
        state["request_id"], state["traceparent"] = request_id, trace
        status = 500
        started = False

        async def tagged_send(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                out_headers = message.get("headers", [])
                if not any(name.lower() == b"x-request-id" for name, _ in out_headers):
                    message = {**message, "headers": [*out_headers, (b"x-request-id", request_id.encode())]}
            try:
                await send(message)
            except OSError as exc:  # the client closed the connection under us
                raise ClientGone() from exc

        client_key = ""
        try:
            try:
                client_key = self._admit(settings, path, headers, scope, state)
                body = await _read_body(receive, headers, settings)
                if body and path not in settings.open_paths:
                    _check_json(body)
            except Refusal as r:
                state["error_kind"] = r.kind
                await _reject(tagged_send, r.status, r.kind, r.detail, r.field_name, r.headers)
            else:
                await self.app(scope, _replay(body, receive), tagged_send)
        except ClientGone:
            status = CLIENT_CLOSED
            state["error_kind"] = "client_disconnect"
        except Exception:
            if not started:
                log.exception("request %s %s failed", request_id, path)
                state["error_kind"] = "internal"
                await _reject(tagged_send, 500, "internal", "internal error (see the service log)")
        finally:
            if client_key:
                settings.inflight[client_key] -= 1
                if not settings.inflight[client_key]:
                    del settings.inflight[client_key]
            seconds = time.perf_counter() - t0
            if settings.observe is not None:
                settings.observe(path, status, seconds, state.get("error_kind"))
            if status >= 400 and status not in (404, 405):
                log.warning("request_id=%s traceparent=%s key=%s %s %s -> %d in %.1f ms", request_id, trace or "-",
                            state.get("key_name", "-"), scope.get("method", ""), path, status, seconds * 1000)

    @staticmethod
    def _admit(settings: GuardSettings, path: str, headers: dict[bytes, bytes], scope: Scope,
               state: dict[str, Any]) -> str:
        """Authorises the request and takes its per-client slot; returns the slot's key ("" for probes)."""
        if path in settings.open_paths:
            return ""
        who = ""
        if settings.keys.enabled:
            header = headers.get(b"authorization", b"")
            found = settings.keys.lookup(header[7:].strip()) if header[:7].lower() == b"bearer " else None
            if found is None:
                raise Refusal(401, "unauthorized", "a valid API key is required (Authorization: Bearer KEY)",
                              headers=[(b"www-authenticate", b'Bearer realm="halo"')])
            role, who = found
            state["key_name"] = who
            if path.startswith(ADMIN_PREFIX) and role != "admin":
                raise Refusal(403, "forbidden", "admin routes need an admin key (admin_api_keys)")
            wait = settings.limiter.acquire(who)
            if wait > 0:
                raise Refusal(429, "rate_limited", f"key {who} is over {settings.rate_limit_rps:g} requests/s",
                              headers=[(b"retry-after", str(max(1, math.ceil(wait))).encode())])
        client = scope.get("client") or ("", 0)
        slot = f"key:{who}" if who else f"addr:{client[0]}"
        if settings.inflight.get(slot, 0) >= settings.max_inflight_per_client:
            raise Refusal(429, "too_many_connections",
                          f"at most {settings.max_inflight_per_client} requests in flight per client",
                          headers=[(b"retry-after", b"1")])
        settings.inflight[slot] = settings.inflight.get(slot, 0) + 1
        return slot


async def _read_body(receive: Receive, headers: dict[bytes, bytes], settings: GuardSettings) -> bytes:
    """The whole body within body_timeout_s and max_body_bytes, else a Refusal (408 / 413)."""
    chunks: list[bytes] = []
    size = 0
    if (length := headers.get(b"content-length")) is not None and length.isdigit() \
            and int(length) > settings.max_body_bytes:
        raise Refusal(413, "too_large", f"request body over {settings.max_body_bytes} bytes")
    deadline = time.monotonic() + settings.body_timeout_s
    while True:
        try:
            message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise Refusal(408, "timeout", f"request body not received within {settings.body_timeout_s:g} s") from None
        if message["type"] == "http.disconnect":
            raise ClientGone()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > settings.max_body_bytes:
            raise Refusal(413, "too_large", f"request body over {settings.max_body_bytes} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _refuse_constant(token: str) -> float:
    raise ValueError(f"{token} is not a number JSON allows")


def _check_json(body: bytes) -> None:
    """Refuse (422, naming the field) a body the routes or the store could not take."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refusal(422, "invalid_request", f"body is not UTF-8 (byte {exc.start})", "body") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise Refusal(422, "invalid_request", f"JSON nested deeper than {MAX_JSON_DEPTH} levels", "body") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, integers past Python's digit limit
        raise Refusal(422, "invalid_request", f"malformed JSON: {str(exc)[:200]}", "body") from None
    _check_value(data, "", 0)


def _check_value(value: Any, where: str, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise Refusal(422, "invalid_request", f"JSON nested deeper than {MAX_JSON_DEPTH} levels", where or "body")
    if isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise Refusal(422, "invalid_request", "integer outside the 64-bit range", where or "body")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise Refusal(422, "invalid_request", "number out of range", where or "body")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(item, f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, where or "body")
            _check_value(item, f"{where}.{key}" if where else key, depth + 1)


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Refusal(422, "invalid_request", "string is not valid Unicode (lone surrogate)",
                      _printable(where) or "body") from None


def _printable(where: str) -> str:
    return where.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")


def _header_text(raw: bytes | None, pattern: re.Pattern[str]) -> str:
    if not raw:
        return ""
    text = raw.decode("latin-1").strip()
    return text if pattern.match(text) else ""


def _route_path(scope: Scope) -> str:
    path = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):] or "/"
    return path


async def _reject(send: Send, status: int, kind: str, detail: str, field_name: str | None = None,
                  extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": kind, "field": field_name, "detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

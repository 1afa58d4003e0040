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
import json
import logging
import math
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from serve.keys import KeyConfigError, KeyIdentity, KeyRing, parse_keys

__all__ = ["KeyConfigError", "KeyRing", "parse_keys"]

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("halo.serve")

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
ADMIN_PREFIX = "/v1/admin/"
MAX_JSON_DEPTH = 32
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Status used in metrics for a client that went away before its answer (nginx's convention).
CLIENT_CLOSED = 499
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RateLimiter:
    """A token bucket per key name: `rate` units/s sustained, bursts of `burst`.

    `acquire` admits while the bucket holds at least one unit; `charge` takes what a request cost
    after it ran (the bucket may go into debt), so a key is limited by the work it causes, not
    only by how many requests it sends."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self._buckets: dict[str, tuple[float, float]] = {}

    def _tokens(self, who: str, now: float) -> float:
        tokens, at = self._buckets.get(who, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def acquire(self, who: str, cost: float = 1.0) -> float:
        """0 when allowed (and `cost` taken), else the seconds until it would be."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        tokens = self._tokens(who, now)
        if tokens >= min(cost, self.burst):
            self._buckets[who] = (tokens - cost, now)
            return 0.0
        self._buckets[who] = (tokens, now)
        return (min(cost, self.burst) - tokens) / self.rate

    def charge(self, who: str, cost: float) -> None:
        if self.rate <= 0 or cost <= 0:
            return
        now = time.monotonic()
        self._buckets[who] = (self._tokens(who, now) - cost, now)


# Routes whose work the cost limiter charges (seconds inside the replica); feedback has its own quotas.
# A body is charged at the rate json + pydantic parse and validate it on one core
# (docs/results/2026-12-03-code-figures.md).
BODY_BYTES_PER_COST_S = 50e6
# Work per request that is not charged: ordinary decisions (well under a millisecond) never count
# against the budget, whatever their rate (rate_limit_rps and the in-flight cap bound that).
FREE_COST_S = 0.002
COSTED_PATHS = frozenset({"/v1/decide", "/v1/decide/batch"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


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
    # Request bodies one address may be sending at once (each within body_timeout_s); a request
    # counts against its key's max_inflight_per_client only once its body has arrived.
    max_uploads_per_address: int = 1024
    rate_limit_rps: float = 0.0
    rate_limit_burst: float = 0.0
    # Seconds of replica work per second one client (key, else address) may cause on the decide
    # routes, and the burst of it; past it 429 + Retry-After. 0 = off.
    cost_limit_s_per_s: float = 0.1
    cost_limit_burst_s: float = 0.5
    # The address the service listens on: without keys, and on loopback, only requests naming a
    # loopback Host are served (DNS rebinding), and any state-changing request from a web page
    # (an Origin that is not loopback) is refused.
    bind_host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        self.open_paths = OPEN_PATHS | ({"/metrics"} if self.metrics_public else set())
        self.limiter = RateLimiter(self.rate_limit_rps, self.rate_limit_burst or self.rate_limit_rps)
        self.cost_limiter = RateLimiter(self.cost_limit_s_per_s, self.cost_limit_burst_s)
        self.inflight: dict[str, int] = {}
        self.uploading: dict[str, int] = {}  # bodies arriving now, per client address


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


class _Exchange:
    """One request as the guard sees it: who, what, and how it ended (for metrics and the log)."""

    def __init__(self, scope: Scope, settings: GuardSettings) -> None:
        self.scope, self.settings = scope, settings
        self.t0 = time.perf_counter()
        self.path = _route_path(scope)
        self.headers = dict(scope.get("headers") or [])
        # Serve's own middleware (proxy and direct ingress) sets X-Request-ID and echoes it in the
        # answer; the fast ingress has none, so the guard adds it to any answer that lacks it.
        self.request_id = _header_text(self.headers.get(b"x-request-id"), _REQUEST_ID) or os.urandom(16).hex()
        self.trace = _header_text(self.headers.get(b"traceparent"), _TRACEPARENT)
        self.state = scope.setdefault("state", {})
        self.state["request_id"], self.state["traceparent"] = self.request_id, self.trace
        self.status, self.started = 500, False
        self.slot = ""  # the in-flight slot taken once the body arrived ("" for none)

    def sender(self, send: Send) -> Send:
        async def tagged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.status, self.started = message["status"], True
                out_headers = message.get("headers", [])
                if not any(name.lower() == b"x-request-id" for name, _ in out_headers):
                    message = {**message, "headers": [*out_headers, (b"x-request-id", self.request_id.encode())]}
            try:
                await send(message)
            except OSError as exc:  # the client closed the connection under us
                raise ClientGone() from exc

        return tagged_send

    async def refuse(self, send: Send, refusal: Refusal) -> None:
        self.state["error_kind"] = refusal.kind
        await _reject(send, refusal.status, refusal.kind, refusal.detail, refusal.field_name, refusal.headers)

    def client_gone(self) -> None:
        self.status = CLIENT_CLOSED
        self.state["error_kind"] = "client_disconnect"

    async def internal_error(self, send: Send) -> None:
        """A route broke (the caller logged it): the client gets the API's 500 if nothing was sent."""
        if not self.started:
            self.state["error_kind"] = "internal"
            await _reject(send, 500, "internal", "internal error (see the service log)")

    def finish(self) -> None:
        seconds = time.perf_counter() - self.t0
        if self.slot:
            _release(self.settings, self.slot, self.path, self.state)
        if self.settings.observe is not None:
            self.settings.observe(self.path, self.status, seconds, self.state.get("error_kind"))
        if self.status >= 400 and self.status not in (404, 405):
            log.warning("request_id=%s traceparent=%s key=%s %s %s -> %d in %.1f ms", self.request_id,
                        self.trace or "-", self.state.get("key_name", "-"), self.scope.get("method", ""), self.path,
                        self.status, seconds * 1000)


class GuardMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        settings = ActiveGuard.settings
        if scope["type"] != "http" or settings is None:
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(scope, settings)
        try:
            await self._serve(exchange, receive, exchange.sender(send))
        finally:
            exchange.finish()

    async def _serve(self, exchange: _Exchange, receive: Receive, send: Send) -> None:
        try:
            body = await _admit(exchange, receive)
        except Refusal as refusal:
            await exchange.refuse(send, refusal)
            return
        except ClientGone:
            exchange.client_gone()
            return
        except Exception:  # noqa: BLE001  (a bug in the guard itself: logged, answered 500)
            log.exception("request %s %s failed", exchange.request_id, exchange.path)
            await exchange.internal_error(send)
            return
        try:
            await self.app(exchange.scope, _replay(body, receive), send)
        except ClientGone:
            exchange.client_gone()
        except Exception:  # noqa: BLE001  (a route broke: logged, answered 500)
            log.exception("request %s %s failed", exchange.request_id, exchange.path)
            await exchange.internal_error(send)


async def _admit(exchange: _Exchange, receive: Receive) -> bytes:
    """Authorise, read the whole body (it costs only its own connection while it arrives), check
    it, then take the client's in-flight slot: a stalled upload never holds its key's slots."""
    settings, path = exchange.settings, exchange.path
    who = _check_caller(settings, path, exchange.headers, exchange.scope, exchange.state)
    body = await _read_body_bounded(receive, exchange.headers, settings, _address(exchange.scope))
    exchange.state["body_bytes"] = len(body)
    if body and path not in settings.open_paths:
        _check_json(body)
    if who is not None:
        exchange.slot = _take_slot(settings, who)
    return body


def _address(scope: Scope) -> str:
    return str((scope.get("client") or ("", 0))[0])


def _check_caller(settings: GuardSettings, path: str, headers: dict[bytes, bytes], scope: Scope,
                  state: dict[str, Any]) -> str | None:
    """Authorises the request (keys, rate and cost limits); returns its client slot name (None for probes)."""
    if path in settings.open_paths:
        return None
    who = ""
    if settings.keys.enabled:
        who = _authorise(settings, path, headers)
        state["key_name"] = who
        wait = settings.limiter.acquire(who)
        if wait > 0:
            raise Refusal(429, "rate_limited", f"key {who} is over {settings.rate_limit_rps:g} requests/s",
                          headers=[(b"retry-after", str(max(1, math.ceil(wait))).encode())])
    else:
        _check_local_caller(settings, headers, scope)
    slot = f"key:{who}" if who else f"addr:{_address(scope)}"
    if path in COSTED_PATHS and (wait := settings.cost_limiter.acquire(slot, 0.0)) > 0:
        raise Refusal(429, "over_cost_budget", f"this client used over {settings.cost_limit_s_per_s:g} s of "
                      "decision work per second; retry later",
                      headers=[(b"retry-after", str(max(1, math.ceil(wait))).encode())])
    return slot


def _take_slot(settings: GuardSettings, slot: str) -> str:
    if settings.inflight.get(slot, 0) >= settings.max_inflight_per_client:
        raise Refusal(429, "too_many_connections",
                      f"at most {settings.max_inflight_per_client} requests in flight per client",
                      headers=[(b"retry-after", b"1")])
    settings.inflight[slot] = settings.inflight.get(slot, 0) + 1
    return slot


async def _read_body_bounded(receive: Receive, headers: dict[bytes, bytes], settings: GuardSettings,
                             address: str) -> bytes:
    """The body, read while at most max_uploads_per_address bodies of one address are arriving
    (each within body_timeout_s): stalled uploads cost their own connections, bounded per address."""
    waiting = settings.uploading.get(address, 0)
    if waiting >= settings.max_uploads_per_address:
        raise Refusal(429, "too_many_connections", f"at most {settings.max_uploads_per_address} request bodies "
                      "arriving at once per address", headers=[(b"retry-after", b"1")])
    settings.uploading[address] = waiting + 1
    try:
        return await _read_body(receive, headers, settings)
    finally:
        settings.uploading[address] -= 1
        if not settings.uploading[address]:
            del settings.uploading[address]


def _release(settings: GuardSettings, slot: str, path: str, state: dict[str, Any]) -> None:
    """Frees the request's per-client slot and charges its cost: the work the routes measured,
    plus reading the body."""
    settings.inflight[slot] -= 1
    if not settings.inflight[slot]:
        del settings.inflight[slot]
    if path in COSTED_PATHS:
        cost = state.get("work_s", 0.0) + state.get("body_bytes", 0) / BODY_BYTES_PER_COST_S
        settings.cost_limiter.charge(slot, cost - FREE_COST_S)


def _authorise(settings: GuardSettings, path: str, headers: dict[bytes, bytes]) -> str:
    """The key's name when its roles allow `path`, else a Refusal (401 / 403)."""
    header = headers.get(b"authorization", b"")
    found: KeyIdentity | None = None
    if header[:7].lower() == b"bearer ":
        found = settings.keys.lookup(header[7:].strip())
    if found is None:
        raise Refusal(401, "unauthorized", "a valid API key is required (Authorization: Bearer KEY)",
                      headers=[(b"www-authenticate", b'Bearer realm="halo"')])
    role = required_role(path)
    if not found.may(role):
        raise Refusal(403, "forbidden", f"this route needs a key with the {role} role"
                      + (" (admin_api_keys)" if role == "admin" else ""))
    return found.name


def required_role(path: str) -> str:
    if path.startswith(ADMIN_PREFIX):
        return "admin"
    return "feedback" if path == "/v1/feedback" else "decision"


def _host_name(value: str) -> str:
    """The host of a Host header or an Origin (scheme://host[:port]), lower case, without the port."""
    value = value.split("://", 1)[-1].split("/", 1)[0].strip().lower()
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _check_local_caller(settings: GuardSettings, headers: dict[bytes, bytes], scope: Scope) -> None:
    """Keyless mode: a browser page must not drive the service (DNS rebinding, cross-site POSTs)."""
    if settings.bind_host in LOOPBACK_NAMES:
        host = _host_name(headers.get(b"host", b"").decode("latin-1"))
        if host and host not in LOOPBACK_NAMES:
            raise Refusal(403, "forbidden", "without API keys the service answers only requests to a loopback "
                                            "host name (Host header)")
    origin = headers.get(b"origin")
    if origin is not None and scope.get("method", "GET") not in ("GET", "HEAD", "OPTIONS") \
            and _host_name(origin.decode("latin-1")) not in LOOPBACK_NAMES:
        raise Refusal(403, "forbidden", "without API keys, state-changing requests from a web page (Origin) are "
                                        "refused")


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

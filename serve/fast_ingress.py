"""The replica's own plain HTTP server for the decision routes (the fast tier's ingress).

Serve's direct ingress already skips the proxy hop, but every request still passes Serve's
per-request machinery in the replica (request wrapping, ongoing-request accounting, metrics
and access logs, a hop to the user-code thread), which kept a replica below the decision
rate it needs even for a no-op (docs/results/2026-12-03-serve-latency.md). This server runs the
replica's *same* FastAPI app (same guard, routes, schemas and model) under uvicorn with uvloop
and httptools, on a thread of the replica process, so a request costs what the app costs.

Serve stays the engine: it starts, health-checks, replaces and scales the replicas, hosts the
proxy path and the handles, and the model swap is the replica's in-process swap, which both
ingresses see at once. The server's port is reported to the model registry like a direct
ingress port. Bounded: at most `max_in_flight` requests at once (503 + Retry-After above, in
the API's error shape), the guard's per-client cap inside that, and idle keep-alive connections
close after `timeout_keep_alive` seconds.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from solvers.errors import HaloError

log = logging.getLogger("halo.serve")
FAST_INGRESS_THREAD = "halo-fast-ingress"


class FastIngressError(HaloError, RuntimeError):
    pass


def bind_in_range(host: str, lo: int, hi: int) -> socket.socket:
    """A listening socket on the first free port of [lo, hi], starting at a random offset
    (several replicas on one node each take their own port)."""
    ports = list(range(lo, hi + 1))
    start = random.randrange(len(ports))
    for port in ports[start:] + ports[:start]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            continue
        sock.listen(2048)
        sock.setblocking(False)
        return sock
    raise FastIngressError(f"no free port for the fast ingress in {lo}-{hi} on {host}")


def bind_shared(host: str, port: int) -> socket.socket:
    """A listening socket on `port` that every replica on this machine binds too (SO_REUSEPORT:
    the kernel spreads new connections over the replicas' sockets, with no proxy in between; a
    replica that dies leaves the group and the others keep answering)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise FastIngressError(f"cannot listen on {host}:{port} for the fast ingress: {exc.strerror}") from exc
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _json_answer(status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]] = ()) -> tuple[dict, dict]:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *extra]
    return {"type": "http.response.start", "status": status, "headers": headers}, {"type": "http.response.body",
                                                                                     "body": data}


class Mounted:
    """The app as this server runs it: mounted at the application's route prefix as Serve mounts
    it (the routes see the path below the prefix through `root_path`; a path outside it is 404),
    and with at most `max_in_flight` requests at once (503 + Retry-After above, in the API's
    error shape: uvicorn's own limit answers text/plain). `in_flight` is what the replica reports
    to Serve's autoscaler (serve/autoscaling.py)."""

    def __init__(self, app: Any, prefix: str, max_in_flight: int, retry_after_s: float = 1.0,
                 on_shed: Callable[[str], None] | None = None) -> None:
        self.app, self.prefix, self.max_in_flight, self.on_shed = app, "/" + prefix.strip("/"), max_in_flight, on_shed
        self.in_flight = 0
        self._not_found = _json_answer(404, {"error": "not_found", "field": None, "detail": "Not Found"})
        detail = f"more than {max_in_flight} requests in flight on this replica; retry"
        self._busy = _json_answer(503, {"error": "overloaded", "field": None, "detail": detail},
                                  [(b"retry-after", str(max(1, round(retry_after_s))).encode()),
                                   (b"connection", b"close")])

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        prefix = self.prefix
        if prefix != "/":
            path = scope.get("path", "")
            if path != prefix and not path.startswith(prefix + "/"):
                await send(self._not_found[0])
                await send(self._not_found[1])
                return
            scope = {**scope, "root_path": scope.get("root_path", "") + prefix}
        if self.in_flight >= self.max_in_flight:
            if self.on_shed is not None:
                self.on_shed(scope.get("path", ""))
            await send(self._busy[0])
            await send(self._busy[1])
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def header_deadline_protocol(timeout_s: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, plus a deadline for a request's headers: a connection whose
    request line and headers have not all arrived `timeout_s` after it opened (or after its
    previous answer) is closed. uvicorn has none; a slow-header client would hold its socket for ever.
    (The body has its own deadline, the guard's body_timeout_s.)"""

    class HeaderDeadlineProtocol(HttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._header_timer = self.loop.call_later(timeout_s, self._headers_too_slow)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._header_timer is None:  # the next request on a kept-alive connection
                self._header_timer = self.loop.call_later(timeout_s, self._headers_too_slow)

        def on_headers_complete(self) -> None:
            self._cancel_header_timer()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol


class FastIngress:
    def __init__(self, app: Any, *, host: str, port_range: tuple[int, int], max_in_flight: int,
                 timeout_keep_alive_s: float, route_prefix: str = "/", retry_after_s: float = 1.0,
                 on_shed: Callable[[str], None] | None = None, header_timeout_s: float = 10.0,
                 shared_port: int = 0) -> None:
        self._sock = bind_shared(host, shared_port) if shared_port else bind_in_range(host, *port_range)
        self.host, self.port = host, self._sock.getsockname()[1]
        self.app = Mounted(app, route_prefix, max_in_flight, retry_after_s, on_shed)
        config = uvicorn.Config(self.app, loop="uvloop",
                                http=header_deadline_protocol(header_timeout_s), lifespan="off", access_log=False,
                                log_level="warning",
                                timeout_keep_alive=max(1, int(timeout_keep_alive_s)), server_header=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name=FAST_INGRESS_THREAD, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        except Exception:  # the replica's health check reports the dead thread
            log.exception("fast ingress on port %d stopped", self.port)

    @property
    def in_flight(self) -> int:
        return self.app.in_flight

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)

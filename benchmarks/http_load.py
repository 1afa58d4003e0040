"""A minimal HTTP/1.1 keep-alive load client on asyncio streams, for benchmarks/serve.py.

Hand-written rather than httpx because on a 2-core machine httpx's own per-request CPU (~0.3 ms)
would dominate the sub-millisecond servers being compared; this client costs a few tens of µs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any


class Conn:
    """One keep-alive HTTP/1.1 connection with a minimal client (content-length bodies only): a
    load generator's own CPU must stay small beside the service it measures."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: bytes = b"") -> tuple[int, bytes]:
        status, _, data = await self.request("POST", path, body, headers)
        return status, data

    async def request(self, method: str, path: str, body: bytes = b"", headers: bytes = b"",
                      ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body); reconnects once when the server had
        closed the kept-alive connection."""
        try:
            return await self._exchange(method, path, body, headers)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.close()
            return await self._exchange(method, path, body, headers)

    async def _exchange(self, method: str, path: str, body: bytes, headers: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(method.encode() + b" " + path.encode() + b" HTTP/1.1\r\nhost: " + self.host.encode()
                          + b"\r\ncontent-type: application/json\r\n" + headers
                          + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        fields: dict[str, str] = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name:
                fields[name.decode("latin-1").lower()] = value.strip().decode("latin-1")
        data = await self.reader.readexactly(int(fields.get("content-length", "0")))
        if fields.get("connection", "").lower() == "close":
            self.close()
        return int(head[9:12]), fields, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


async def latency(targets: dict[str, tuple[str, int, str]], make: dict[str, Callable[[int], dict[str, Any]]],
                  n: int) -> dict[str, list[float]]:
    """Concurrency 1, the targets interleaved so drifting background load hits all of them alike.
    Returns milliseconds per request, per target."""
    conns = {k: Conn(h, p) for k, (h, p, _) in targets.items()}
    out: dict[str, list[float]] = {k: [] for k in targets}
    try:
        for i in range(n):
            for k, (_, _, path) in targets.items():
                body = json.dumps(make[k](i)).encode()
                t0 = time.perf_counter()
                status, data = await conns[k].post(path, body)
                out[k].append((time.perf_counter() - t0) * 1000.0)
                if status != 200:
                    raise RuntimeError(f"{k}: {status} {data[:200]!r}")
    finally:
        for c in conns.values():
            c.close()
    return out


async def throughput(host: str, port: int | list[int], path: str, make: Callable[[int], dict[str, Any]],
                     concurrency: int, seconds: float) -> tuple[float, int]:
    """Requests/s over `seconds` with `concurrency` keep-alive connections (spread over the ports
    given, as a load balancer in front of several replicas would), and the non-200 count."""
    ports = port if isinstance(port, list) else [port]
    done, errors = 0, 0
    bodies = [json.dumps(make(i)).encode() for i in range(64)]
    deadline = time.monotonic() + seconds

    async def worker(w: int) -> None:
        nonlocal done, errors
        conn = Conn(host, ports[w % len(ports)])
        i = w
        try:
            while time.monotonic() < deadline:
                status, _ = await conn.post(path, bodies[i % len(bodies)])
                if status == 200:
                    done += 1
                else:
                    errors += 1
                i += concurrency
        finally:
            conn.close()

    t0 = time.monotonic()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return done / (time.monotonic() - t0), errors

"""Connections stalled inside their headers are closed: 20 clients that send half a request line
and headers and then nothing are all disconnected by the replica's own server after its
header_timeout_s (3 s on `tight`), while a normal request still gets its answer."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlparse

import httpx

STALLED = 20


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False  # nothing came and the connection is still open
    except ConnectionResetError:
        return True


def test_connections_stalled_in_their_headers_are_closed(cluster):
    url = urlparse(cluster.tight.direct_url)
    socks = []
    for _ in range(STALLED):
        sock = socket.create_connection((url.hostname, url.port), timeout=10)
        sock.sendall(b"POST /tight/v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
        socks.append(sock)
    assert httpx.get(f"{cluster.tight.direct_url}/healthz", timeout=10).status_code == 200
    time.sleep(3.0 + 2.0)
    for sock in socks:
        sock.settimeout(1.0)
    closed = sum(_closed(sock) for sock in socks)
    for sock in socks:
        sock.close()
    assert closed == STALLED

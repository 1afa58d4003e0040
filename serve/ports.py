"""A free TCP port on this machine (tests, benchmarks and local services that need one)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now; the OS picks it, so two callers do not collide
    (a race with another process that binds it before the caller does remains possible)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])

"""A real S3-compatible server (moto_server) on 127.0.0.1 for tests, plus a fault-injecting proxy.

Usage in a conftest or test module:

    from tests.s3_server import S3Server

    @pytest.fixture(scope="module")
    def s3():
        with S3Server() as server:
            server.create_bucket("halo")
            yield server          # server.endpoint, server.storage_options(), server.env()

`FaultProxy(upstream_port)` sits between a client and the server and can be switched, while
running, to drop connections or answer HTTP 503 — a storage outage without touching the server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Literal

from serve.ports import free_port

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"



def _wait_for_port(port: int, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"moto_server exited early with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s}s")


def _moto_server_bin() -> str:
    local = Path(sys.executable).with_name("moto_server")
    if local.exists():
        return str(local)
    found = shutil.which("moto_server")
    if not found:
        raise RuntimeError("moto_server not found: install the dev extra (moto[server])")
    return found


class S3Server:
    """`moto_server` as a subprocess on a free port; stopped (and reaped) on exit."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        self.proc = subprocess.Popen(
            [_moto_server_bin(), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
        )
        _wait_for_port(self.port, 20.0, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, endpoint: str | None = None):  # noqa: ANN201  (boto3 client type is dynamic)
        import boto3

        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The usual AWS variables pointing at this server (what a user would export)."""
        return {
            "AWS_ENDPOINT_URL": endpoint or self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
        }


ProxyMode = Literal["pass", "drop", "503"]

_BODY_503 = b"<Error><Code>SlowDown</Code><Message>injected outage</Message></Error>"
_RESPONSE_503 = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
                 b"Content-Length: " + str(len(_BODY_503)).encode() + b"\r\nConnection: close\r\n\r\n" + _BODY_503)


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of a real server; `mode` switches faults on and off.

    pass: bytes flow both ways. drop: new and existing connections are closed at once.
    503: new connections read the request and get `503 SlowDown` (S3's throttling reply).
    """

    def __init__(self, upstream_port: int, port: int | None = None) -> None:
        self.upstream_port = upstream_port
        self.port = port or free_port()
        self.mode: ProxyMode = "pass"
        self.faults_served = 0
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode: ProxyMode) -> None:
        self.mode = mode
        if mode != "pass":
            self._close_all()

    def start(self) -> FaultProxy:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen(128)
        self._listener.settimeout(0.2)
        threading.Thread(target=self._accept_loop, daemon=True, name="fault-proxy").start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
        self._close_all()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _close_all(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            mode = self.mode
            if mode == "drop":
                self.faults_served += 1
                client.close()
                continue
            if mode == "503":
                self.faults_served += 1
                threading.Thread(target=self._answer_503, args=(client,), daemon=True).start()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _answer_503(client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            client.settimeout(2)
            client.recv(65536)
            client.sendall(_RESPONSE_503)
        with contextlib.suppress(OSError):
            client.close()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            src.settimeout(None)
            while True:
                data = src.recv(65536)
                if not data or self.mode == "drop":
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)

"""A local HTTP server that answers POSTs and GETs from a script of (status, headers, JSON body), for the
clients' tests (retry rules, what a decision answer carries); 500 once the script is spent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class ScriptedHTTP(BaseHTTPRequestHandler):
    script: list[tuple[int, dict[str, str], dict]] = []
    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._answer()

    def do_GET(self) -> None:  # noqa: N802
        self._answer()

    def _answer(self) -> None:
        self.seen.append(self.path)
        status, headers, body = self.script.pop(0) if self.script else (500, {}, {"error": "internal"})
        data = json.dumps(body).encode()
        self.send_response(status)
        for k, v in {"content-type": "application/json", "content-length": str(len(data)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedHTTP)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ScriptedHTTP.seen.clear()
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()

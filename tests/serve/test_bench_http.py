"""The load benchmarks' minimal HTTP client (benchmarks/http_load.Conn) and the plans benchmark's
callers built on it: status, headers and body as sent, and a connection the server closed is
opened again instead of failing the caller."""

from __future__ import annotations

import asyncio

from scripted_http import ScriptedHTTP

from benchmarks.http_load import Conn
from benchmarks.serve_plans import Caller, follow, submit


def test_conn_reads_status_headers_and_body_and_reconnects(flaky):
    server, _url = flaky
    ScriptedHTTP.script = [(202, {"Retry-After": "2"}, {"id": "j1"}), (200, {}, {"status": "running"})]

    async def run() -> list[tuple[int, dict[str, str], bytes]]:
        conn = Conn("127.0.0.1", server.server_address[1])
        try:  # the scripted server speaks HTTP/1.0: it closes after each answer, so the second reconnects
            return [await conn.request("POST", "/v1/plans", b'{"a": 1}', b"idempotency-key: k\r\n"),
                    await conn.request("GET", "/v1/plans/j1")]
        finally:
            conn.close()

    first, second = asyncio.run(run())
    assert first[0] == 202 and first[1]["retry-after"] == "2" and first[2] == b'{"id": "j1"}'
    assert second[0] == 200 and second[2] == b'{"status": "running"}'
    assert ScriptedHTTP.seen == ["/v1/plans", "/v1/plans/j1"]


def test_caller_submits_again_after_retry_after_and_follows_to_the_end(flaky):
    server, _url = flaky
    ScriptedHTTP.script = [(429, {"Retry-After": "0"}, {"error": "busy"}), (202, {}, {"id": "j2"}),
                           (200, {"Retry-After": "0"}, {"id": "j2", "status": "running", "steps": []}),
                           (200, {}, {"id": "j2", "status": "succeeded", "steps": [{}]})]

    async def run() -> tuple[int, tuple[dict | None, int]]:
        caller = Caller("127.0.0.1", server.server_address[1])
        try:
            r = await submit(caller, 7, {"task_description": "x"}, deadline=float("inf"))
            return r.status_code, await follow(caller, r.json()["id"], deadline=float("inf"))
        finally:
            caller.close()

    status, (final, server_errors) = asyncio.run(run())
    assert status == 202 and server_errors == 0
    assert final is not None and final["status"] == "succeeded"
    assert ScriptedHTTP.seen == ["/v1/plans", "/v1/plans", "/v1/plans/j2", "/v1/plans/j2"]

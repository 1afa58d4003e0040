"""The fast ingress's own layer (serve/fast_ingress.py): the route prefix, the in-flight cap and
its 503 in the API's error shape, and port selection. The routes behind it are the service's
own and are covered through `direct_url` by the hostile, client and load suites."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from fastapi import FastAPI

from serve.fast_ingress import FastIngressError, Mounted, bind_in_range


def _app(gate: asyncio.Event | None = None) -> FastAPI:
    app = FastAPI()

    @app.get("/readyz")
    async def ready() -> dict[str, bool]:
        if gate is not None:
            await gate.wait()
        return {"ready": True}

    return app


async def _get(app, *paths: str) -> list[httpx.Response]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replica") as client:
        return await asyncio.gather(*(client.get(p) for p in paths))


def test_routes_are_served_below_the_route_prefix_and_nothing_outside_it():
    ok, outside, lookalike = asyncio.run(_get(Mounted(_app(), "/decide", 8), "/decide/readyz", "/readyz",
                                              "/decidex/readyz"))
    assert ok.status_code == 200 and ok.json() == {"ready": True}
    for r in (outside, lookalike):
        assert r.status_code == 404
        assert r.json() == {"error": "not_found", "field": None, "detail": "Not Found"}
    (plain,) = asyncio.run(_get(Mounted(_app(), "/", 8), "/readyz"))
    assert plain.status_code == 200


def test_requests_past_the_in_flight_cap_get_503_in_the_error_shape_and_are_counted():
    shed: list[str] = []

    async def run() -> list[httpx.Response]:
        gate = asyncio.Event()
        app = Mounted(_app(gate), "/", 2, retry_after_s=3, on_shed=shed.append)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replica") as client:
            held = [asyncio.create_task(client.get("/readyz")) for _ in range(2)]
            await asyncio.sleep(0.05)  # both are inside the app, waiting on the gate
            assert app.in_flight == 2  # what the replica reports to the autoscaler
            extra = await client.get("/readyz")
            gate.set()
            answers = [extra, *await asyncio.gather(*held)]
            assert app.in_flight == 0
            return answers

    extra, *held = asyncio.run(run())
    assert extra.status_code == 503
    assert extra.headers["retry-after"] == "3" and extra.headers["content-type"] == "application/json"
    assert extra.json()["error"] == "overloaded" and "2 requests" in extra.json()["detail"]
    assert [r.status_code for r in held] == [200, 200]
    assert shed == ["/readyz"]


def _taken_port_with_a_free_neighbour() -> tuple[socket.socket, int]:
    for _ in range(50):
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                taken.close()
                continue
        taken.listen(1)
        return taken, port
    raise RuntimeError("no port with a free neighbour")


def test_a_port_in_use_is_skipped_and_a_full_range_is_a_clear_error():
    taken, port = _taken_port_with_a_free_neighbour()
    try:
        with pytest.raises(FastIngressError, match=f"no free port .* {port}-{port}"):
            bind_in_range("127.0.0.1", port, port)
        sock = bind_in_range("127.0.0.1", port, port + 1)
        assert sock.getsockname()[1] == port + 1
        sock.close()
    finally:
        taken.close()

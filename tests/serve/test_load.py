"""Load behaviour on loopback: overload gives 503 + Retry-After past the bounded queues and the
service recovers; a killed replica is replaced with at most the in-flight requests failing; a short
bounded load run loses nothing and the metrics account for every decision."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from serve_synthetic import MAP_V1, SYMPTOMS, symptom_state
from trickle import Trickle


def _decisions_total(text: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("halo_serve_decisions_total{"))


def test_overload_gives_503_with_retry_after_and_recovers(cluster):
    heavy = {"states": [symptom_state(i % len(SYMPTOMS), task=i).to_dict() for i in range(256)]}

    async def flood() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=cluster.tight_url, timeout=60) as client:
            return await asyncio.gather(*(client.post("/v1/decide/batch", json=heavy) for _ in range(40)))

    responses = asyncio.run(flood())
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 503}, codes
    rejected = [r for r in responses if r.status_code == 503]
    assert rejected and codes.count(200) >= 1
    assert all(r.headers.get("retry-after") == "2" for r in rejected)
    for r in responses:
        if r.status_code == 200:
            assert [d["agent_id"] for d in r.json()["decisions"]] == [MAP_V1[i % len(SYMPTOMS)] for i in range(256)]
    # still serving afterwards
    r = httpx.post(f"{cluster.tight_url}/v1/decide", json=symptom_state(3).to_dict(), timeout=30)
    assert r.status_code == 200 and r.json()["agent_id"] == MAP_V1[3]
    assert httpx.get(f"{cluster.tight_url}/readyz", timeout=30).status_code == 200


def _replica_actor_names(app: str) -> list[str]:
    import ray

    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                  if a["name"].startswith(f"SERVE_REPLICA::{app}#DecisionService#"))


def test_killed_replica_is_replaced_with_only_in_flight_failures(cluster, auth):
    import ray

    from serve.launcher import live_direct_ports

    before = _replica_actor_names("main")
    assert len(before) == 2
    ports_before = cluster.main.refresh_direct_ports()
    with Trickle(cluster.url, auth, workers=2, pause_s=0.005) as trickle:
        trickle.wait_for(20)
        victim = ray.get_actor(before[0], namespace="serve")
        ray.kill(victim, no_restart=True)
        deadline = time.monotonic() + 60
        while True:
            names = _replica_actor_names("main")
            if len(names) == 2 and before[0] not in names:
                break
            assert time.monotonic() < deadline, f"replica not replaced: {names}"
            time.sleep(0.2)
        from trickle import Outcome  # noqa: F401  (type of the outcomes below)

        replaced_at = time.monotonic()
        httpx.get(f"{cluster.url}/readyz", timeout=30)
        trickle.wait_for(40, timeout_s=60)
    failures = trickle.failures()
    assert len(failures) <= trickle.workers, failures  # at most the requests in flight on the dead replica
    # The direct-ingress URLs follow the replacement: two live replicas, each answering on its own port.
    deadline = time.monotonic() + 30
    while len(cluster.main.refresh_direct_ports()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    urls = cluster.main.direct_urls()  # the replacement may or may not reuse the dead one's port
    assert len(urls) == 2 and set(cluster.main.direct_ports) <= set(live_direct_ports(cluster.main.registry)), \
        (ports_before, urls)
    assert all(httpx.get(f"{u}/readyz", timeout=10).status_code == 200 for u in urls)
    assert cluster.direct_url in urls
    # Every request sent after the replacement was in place succeeded (a request that was in flight
    # on the dead replica may finish, or fail, later than that).
    late = [o for o in trickle.snapshot() if o.started > replaced_at and o.status != 200]
    assert late == [], late


@pytest.mark.parametrize("concurrency", [8])
def test_bounded_load_run_loses_nothing(cluster, auth, concurrency):
    duration_s = 3.0
    before = _decisions_total(httpx.get(f"{cluster.url}/metrics", headers=auth, timeout=30).text)

    async def worker(client: httpx.AsyncClient, w: int, deadline: float, out: list[tuple[int, int, int]]) -> None:
        i = w
        while time.monotonic() < deadline:
            symptom = i % len(SYMPTOMS)
            r = await client.post("/v1/decide", json=symptom_state(symptom, task=i % 11).to_dict())
            out.append((r.status_code, symptom, r.json().get("agent_id", -1) if r.status_code == 200 else -1))
            i += concurrency

    async def run() -> list[tuple[int, int, int]]:
        out: list[tuple[int, int, int]] = []
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(base_url=cluster.url, headers=auth, timeout=30, limits=limits) as client:
            deadline = time.monotonic() + duration_s
            await asyncio.gather(*(worker(client, w, deadline, out) for w in range(concurrency)))
        return out

    results = asyncio.run(run())
    assert len(results) > 50
    assert [s for s, _, _ in results if s != 200] == []
    assert all(agent == MAP_V1[symptom] for _, symptom, agent in results)
    print(f"\nload run: {len(results)} decisions in {duration_s}s at concurrency {concurrency} "
          f"({len(results) / duration_s:.0f}/s on a shared 2-core machine)")
    time.sleep(1.0)  # one sync interval for the other replica's counters to reach the registry
    after = _decisions_total(httpx.get(f"{cluster.url}/metrics", headers=auth, timeout=30).text)
    assert after - before >= len(results)

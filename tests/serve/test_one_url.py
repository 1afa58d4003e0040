"""One URL, the fast one: replicas on one machine share the fast ingress's port (SO_REUSEPORT), the
URL `halo serve` prints first; a request counts against its key's in-flight cap only once its
body has arrived, so 200 stalled uploads under key A starve neither key A's other clients nor key B."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import httpx
import pytest
from serve_keys import API_KEY, STALL_KEY
from serve_service import running_service
from serve_synthetic import symptom_state

from serve.ports import free_port

KEY_A = STALL_KEY.split("=", 1)[1]
KEY_B = API_KEY


@pytest.fixture(scope="module")
def one_url(cluster) -> Iterator[object]:
    from serve.config import ServeConfig

    config = ServeConfig(model=str(cluster.models.v1), port=cluster.port, fast_port=free_port(), app_name="oneurl",
                         route_prefix="/oneurl", num_replicas=2, replica_num_cpus=0, registry_name="reg-oneurl",
                         api_keys=[API_KEY, STALL_KEY], max_inflight_per_client=12, body_timeout_s=10)
    with running_service(config) as service:
        yield service


def test_both_replicas_answer_on_the_one_url(one_url):
    url = one_url.fast_url  # type: ignore[attr-defined]
    assert urlparse(url).port == one_url.config.fast_port  # type: ignore[attr-defined]
    replicas = set()
    for _ in range(40):  # a new connection each time: the kernel picks a replica per connection
        replicas.add(httpx.get(f"{url}/readyz", timeout=10).json()["replica"])
    assert len(replicas) == 2
    assert httpx.get(f"{one_url.url}/readyz", timeout=30).status_code == 200  # type: ignore[attr-defined]


def test_one_url_flags_of_halo_serve():
    from cluster.commands.serve import one_url as resolve
    from serve.config import ConfigError, ServeConfig

    cfg = resolve(ServeConfig(), None, None)
    assert (cfg.fast_port, cfg.port) == (8000, 8001)
    cfg = resolve(ServeConfig(), 9000, 9100)
    assert (cfg.fast_port, cfg.port) == (9000, 9100)
    assert resolve(ServeConfig(fast_ingress=False), 9000, None).port == 9000
    with pytest.raises(ConfigError, match="fast_port"):
        resolve(ServeConfig(), 9000, 9000)


def _stall(host: str, port: int, prefix: str, token: str) -> socket.socket:
    s = socket.create_connection((host, port))
    s.sendall(f"POST {prefix}/v1/decide HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              f"authorization: Bearer {token}\r\ncontent-length: 5000\r\n\r\n{{".encode())
    return s


def test_200_stalled_uploads_under_key_a_starve_neither_key_a_nor_key_b(one_url):
    url = one_url.fast_url  # type: ignore[attr-defined]
    u = urlparse(url)
    stalled = [_stall(u.hostname or "127.0.0.1", u.port or 80, u.path.rstrip("/"), KEY_A) for _ in range(200)]
    try:
        time.sleep(0.5)
        worst = 0.0
        for _ in range(5):
            for token in (KEY_A, KEY_B):
                with httpx.Client(timeout=5) as client:  # a new connection, as another client would open
                    t0 = time.perf_counter()
                    r = client.post(f"{url}/v1/decide", json=symptom_state(2).to_dict(),
                                    headers={"Authorization": f"Bearer {token}"})
                    worst = max(worst, time.perf_counter() - t0)
                assert r.status_code == 200, r.text
        assert worst < 1.0, f"slowest answer {worst:.3f} s beside 200 stalled uploads"
    finally:
        for s in stalled:
            s.close()
    # the stalled uploads end on the body deadline (408), not holding anything for ever

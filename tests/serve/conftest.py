"""One real Ray (in-process, 2 CPUs) + Serve on 127.0.0.1 shared by all serving tests, with two
applications: `main` (2 replicas, API keys, feedback store) and `tight` (1 replica, tiny queues)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from serve.ports import free_port

sys.path.insert(0, str(Path(__file__).parent))

from scripted_http import flaky  # noqa: E402, F401  (the clients' scripted local server)
from serve_keys import ADMIN_KEY, API_KEY, FEEDBACK_KEY, STALL_KEY  # noqa: E402, F401
from serve_synthetic import MAP_V1, MAP_V2, train_version  # noqa: E402


@dataclass
class Models:
    v1: Path
    v2: Path
    bad: Path


@dataclass
class Cluster:
    port: int
    main: object  # serve.launcher.RunningService
    tight: object
    models: Models
    store: Path

    @property
    def url(self) -> str:
        return self.main.url  # type: ignore[attr-defined]

    @property
    def tight_url(self) -> str:
        return self.tight.url  # type: ignore[attr-defined]

    @property
    def direct_url(self) -> str:
        """One `main` replica's own HTTP server (its fast ingress): no proxy hop."""
        return self.main.direct_url  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> Models:
    root = tmp_path_factory.mktemp("models")
    train_version(root / "v1", MAP_V1, "v1")
    train_version(root / "v2", MAP_V2, "v2", seed=1)
    bad = root / "bad"
    train_version(bad, MAP_V1, "v3-bad")
    manifest = (bad / "manifest.json").read_text().replace('"20": "20"', '"20": "19"')  # duplicate label
    (bad / "manifest.json").write_text(manifest)
    return Models(root / "v1", root / "v2", bad)


_HERE = Path(__file__).resolve().parent
_running: list[bool] = []  # non-empty while this package's Ray + Serve is up


def _stop_cluster() -> None:
    import ray
    from ray import serve

    if _running:
        _running.clear()
        serve.shutdown()
        ray.shutdown()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # pytest's "package" scope is the whole session for a folder without __init__.py, so the
    # shared Serve instance is stopped here when the next test lies outside tests/serve: the
    # other test packages start their own Ray and count processes.
    if nextitem is None or _HERE not in Path(str(nextitem.path)).resolve().parents:
        _stop_cluster()


@pytest.fixture(scope="session")
def cluster(models, tmp_path_factory) -> Iterator[Cluster]:
    from serve.config import ServeConfig
    from serve.launcher import start_service, stop_service

    port = free_port()
    _direct_ingress_port_range()
    _short_direct_ingress_drain()
    store = tmp_path_factory.mktemp("store")
    roots = tmp_path_factory.getbasetemp()  # admin may deploy the models the tests make there, nothing else
    main_cfg = ServeConfig(model=str(models.v1), port=port, app_name="main", route_prefix="/", num_replicas=2,
                           replica_num_cpus=0, api_keys=[API_KEY, STALL_KEY], admin_api_keys=[ADMIN_KEY],
                           feedback_api_keys=[API_KEY, FEEDBACK_KEY], model_roots=[str(roots)],
                           max_body_bytes=64_000, max_inflight_per_client=12, body_timeout_s=5,
                           feedback_store=str(store), registry_name="reg-main", sync_interval_s=0.2,
                           max_ongoing_requests=32, max_queued_requests=64)
    tight_cfg = ServeConfig(model=str(models.v1), port=port, app_name="tight", route_prefix="/tight",
                            num_replicas=1, replica_num_cpus=0, registry_name="reg-tight", model_roots=[str(roots)],
                            max_ongoing_requests=1, max_queued_requests=1, retry_after_s=2,
                            max_batch_states=256, max_body_bytes=4_000_000,
                            feedback_store=str(tmp_path_factory.mktemp("tight-store")), feedback_episodes_per_hour=3,
                            feedback_batch_wait_s=0.05, header_timeout_s=3)
    main = start_service(main_cfg, num_cpus=2)
    _running.append(True)
    try:
        tight = start_service(tight_cfg)
        yield Cluster(port, main, tight, models, store)
    finally:
        _stop_cluster()
        _ = stop_service  # services die with Serve; stop_service is exercised by `halo serve`


@pytest.fixture(scope="session")
def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="session")
def admin_auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_KEY.split('=', 1)[1]}"}


def _short_direct_ingress_drain() -> None:
    """A direct-ingress replica waits 30 s before it stops, by default, so that a load balancer can
    drop it first; no load balancer fronts the tests, and the wait was 30 s of each session's end."""
    import os

    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S", "1")


def _direct_ingress_port_range() -> None:
    """Replicas' direct-ingress servers take ports from a range: a random one, not Serve's fixed
    30000-31000, since other test sessions share this machine (Serve retries a port in use)."""
    import os
    import random

    base = random.randrange(20_000, 28_000, 200)
    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT", str(base))
    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT", str(base + 99))
    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT", str(base + 100))
    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MAX_GRPC_PORT", str(base + 199))

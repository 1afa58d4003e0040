"""Keys fail closed. The key file is re-read when it changes: an emptied, unreadable or wholly
invalid file keeps the last good keys (and says so: log, metric, /readyz), a deleted one revokes
its keys, an invalid line is refused on its own, and a service that had keys never becomes keyless.
Without keys (loopback), requests must name a loopback Host and web pages cannot POST."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from serve.keys import KeyIdentity, KeyRing

ADMIN = "admin-key-aaaaaaaaaaaa"
LEAKED = "leaked-key-bbbbbbbbbbb"
DECIDER = "decider-key-cccccccccc"


def _touch_later(path: Path, ring: KeyRing | None = None) -> None:
    later = time.time() + 5 + time.monotonic() % 1
    os.utime(path, (later, later))
    if ring is not None:
        ring._checked = 0.0  # the file is looked at once a second


def _ring(path: Path, problems: list[str]) -> KeyRing:
    path.write_text(f"admin ops={ADMIN}\ndecision leaked={LEAKED}\ndecision planner={DECIDER}\n")
    return KeyRing(key_file=str(path), on_problem=problems.append)


@pytest.mark.parametrize("content", ["", "\n# all keys commented out\n", "decision short=abc\n", b"\xff\xfe\x00"])
def test_an_emptied_unreadable_or_invalid_file_keeps_the_last_good_keys(tmp_path, content):
    path = tmp_path / "keys"
    problems: list[str] = []
    ring = _ring(path, problems)
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)  # type: ignore[operator]
    _touch_later(path, ring)
    assert ring.enabled
    assert ring.lookup(ADMIN.encode()) == KeyIdentity("ops", frozenset({"admin"}))
    assert ring.status()["state"] in {"empty", "invalid", "unreadable"} and problems
    assert ADMIN not in str(ring.status())  # never a key in what is reported


def test_a_directory_in_place_of_the_file_is_unreadable_and_keeps_the_keys(tmp_path):
    path = tmp_path / "keys"
    problems: list[str] = []
    ring = _ring(path, problems)
    path.unlink()
    path.mkdir()
    _touch_later(path, ring)
    assert ring.lookup(DECIDER.encode()) is not None and ring.status()["state"] == "unreadable"


def test_deleting_the_file_revokes_its_keys_and_never_opens_the_service(tmp_path):
    path = tmp_path / "keys"
    problems: list[str] = []
    ring = _ring(path, problems)
    path.unlink()
    ring._checked = 0.0
    assert ring.lookup(ADMIN.encode()) is None and ring.lookup(DECIDER.encode()) is None
    assert ring.enabled  # no key left: every request is refused, none admitted
    assert problems == ["deleted"]


def test_invalid_lines_are_refused_one_by_one_and_a_removed_key_is_revoked(tmp_path):
    path = tmp_path / "keys"
    problems: list[str] = []
    ring = _ring(path, problems)
    # the leaked key is removed; a typo and a short key elsewhere must not keep it alive
    path.write_text(f"admin ops={ADMIN}\ndecison typo=some-key-dddddddddddd\ndecision planner={DECIDER}\n"
                    "decision short=abc\nfeedback bad name=key-eeeeeeeeeeeeeeee\n")
    _touch_later(path, ring)
    assert ring.lookup(LEAKED.encode()) is None
    assert ring.lookup(DECIDER.encode()) == KeyIdentity("planner", frozenset({"decision"}))
    status = ring.status()
    assert status["state"] == "lines_refused" and ":2:" in status["detail"] and ":4:" in status["detail"]
    assert "abc" not in status["detail"] and "dddd" not in status["detail"]
    assert problems == ["lines_refused"]


@pytest.fixture(scope="module")
def keyed(cluster, tmp_path_factory):
    from serve.config import ServeConfig
    from serve.launcher import start_service

    path = tmp_path_factory.mktemp("keyed") / "keys"
    path.write_text(f"admin ops={ADMIN}\ndecision planner={DECIDER}\n")
    cfg = ServeConfig(model=str(cluster.models.v1), port=cluster.port, app_name="keyed", route_prefix="/keyed",
                      num_replicas=1, replica_num_cpus=0, registry_name="reg-keyed", api_keys_file=str(path))
    return start_service(cfg), path


def _admin(url: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(f"{url}/v1/admin/model", headers=headers, timeout=30).status_code


def test_emptying_then_deleting_the_key_file_of_a_running_service(keyed):
    service, path = keyed
    url = service.direct_url
    assert _admin(url, None) == 401 and _admin(url, ADMIN) == 200
    path.write_text("")
    _touch_later(path)
    time.sleep(1.5)
    assert _admin(url, None) == 401  # authentication stays on, admin routes included
    assert _admin(url, ADMIN) == 200  # the last good keys stay in force
    ready = httpx.get(f"{url}/readyz", timeout=30).json()
    assert ready["key_file"]["state"] == "empty", ready
    metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert 'halo_serve_key_file_problems_total{problem="empty"}' in metrics
    path.unlink()
    time.sleep(1.5)
    assert _admin(url, ADMIN) == 401 and _admin(url, None) == 401  # revoked, and still not open
    decide = httpx.post(f"{url}/v1/decide", json={"task_description": "x", "domain": "", "problem": ""}, timeout=30)
    assert decide.status_code == 401


def test_keyless_loopback_service_refuses_foreign_hosts_and_web_pages(cluster):
    url = cluster.tight_url  # no keys, bound to 127.0.0.1
    rebound = httpx.post(f"{url}/v1/admin/rollback", headers={"Host": "attacker.example:8000"}, timeout=30)
    assert rebound.status_code == 403 and "Host" in rebound.json()["detail"]
    page = httpx.post(f"{url}/v1/admin/rollback", headers={"Origin": "http://attacker.example"}, timeout=30)
    assert page.status_code == 403 and "Origin" in page.json()["detail"]
    assert httpx.get(f"{url}/v1/admin/model", headers={"Origin": "http://localhost:3000"}, timeout=30).status_code \
        == 200  # a local page and a local client still work
    assert httpx.get(f"{url}/readyz", headers={"Host": "attacker.example"}, timeout=30).status_code == 200  # probes

"""Hostile requests against the real service (the direct-ingress path production planners use):
bytes that are not UTF-8 or not encodable, JSON nested too deep, numbers the store cannot hold,
unknown fields, conflicting feedback, decision keys on admin routes, 200 stalled clients. Every
answer is 4xx in the documented shape, never 5xx, and nothing unreadable is stored."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlparse

import httpx
import pytest
from serve_keys import STALL_KEY
from serve_synthetic import rule_state, symptom_state

SHAPE = {"error", "field", "detail"}


@pytest.fixture(scope="module")
def direct(cluster, auth):
    assert cluster.direct_url and cluster.direct_url != cluster.url
    with httpx.Client(base_url=cluster.direct_url, headers=auth, timeout=30) as c:
        yield c


def _raw(client: httpx.Client, path: str, body: bytes) -> httpx.Response:
    return client.post(path, content=body, headers={"content-type": "application/json"})


def _refused(r: httpx.Response, status: int, field: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == SHAPE, body
    if field is not None:
        assert body["field"] == field, body
    assert r.headers.get("x-request-id")
    return body


def _feedback(episode_id: str) -> dict:
    steps = [{"step": 0, "state": rule_state("empty").to_dict(), "agent_id": 2, "decided_by": "rule"},
             {"step": 1, "state": symptom_state(0).to_dict(), "agent_id": 13, "decided_by": "model",
              "plan_found": True, "plan_valid": True, "plan_after": "(stack a b)\n", "cost_usd": 0.001}]
    return {"episode_id": episode_id, "llm_backend": "sim", "success_validator": True, "success_oracle": True,
            "task_id": "syn/blocks/0", "family": "classical", "domain_name": "blocks", "steps": steps}


def test_direct_ingress_answers_like_the_proxy(cluster, direct, auth):
    state = symptom_state(1).to_dict()
    via_proxy = httpx.post(f"{cluster.url}/v1/decide", json=state, headers=auth, timeout=30).json()
    via_direct = direct.post("/v1/decide", json=state).json()
    assert via_direct["agent_id"] == via_proxy["agent_id"] and via_direct["policy_version"] == "v1"
    assert httpx.get(f"{cluster.direct_url}/readyz", timeout=10).json()["ready"] is True


def test_lone_surrogates_and_bad_bytes_are_422_never_500(direct):
    state = symptom_state(0).to_dict()
    surrogate = json.dumps({**state, "plan": "\ud800"}).encode()  # valid JSON, not encodable as UTF-8
    assert b"\\ud800" in surrogate
    _refused(_raw(direct, "/v1/decide", surrogate), 422, "plan")
    batch = json.dumps({"states": [state, {**state, "domain": "x\udfff"}]}).encode()
    _refused(_raw(direct, "/v1/decide/batch", batch), 422, "states[1].domain")
    key = json.dumps({**state, "\ud800": 1}).encode()
    _refused(_raw(direct, "/v1/decide", key), 422)
    _refused(_raw(direct, "/v1/decide", b'{"task_description": "\xff\xfe"}'), 422, "body")  # not UTF-8
    _refused(_raw(direct, "/v1/decide", b"[" * 5000 + b"]" * 5000), 422, "body")  # deeper than any parser wants
    _refused(_raw(direct, "/v1/decide", b'{"task_description": "t", "step": ' + b"9" * 5000 + b"}"), 422, "body")
    _refused(_raw(direct, "/v1/decide", b'{"task_description": "t", "step": 99999999999999999999}'), 422, "step")
    _refused(_raw(direct, "/v1/decide", b'{"task_description": "t", "step": NaN}'), 422, "body")
    _refused(direct.post("/v1/decide", json={**state, "step": 10**9}), 422, "step")
    _refused(direct.post("/v1/decide", json={**state, "history": [22]}), 422, "history[0]")
    # still serving
    assert direct.post("/v1/decide", json=state).status_code == 200


def test_unknown_fields_are_refused_naming_them(direct):
    r = direct.post("/v1/decide", json={"task_description": "t", "plan_vaild": True})
    assert "plan_vaild" in json.dumps(_refused(r, 422, "plan_vaild"))
    _refused(direct.post("/v1/decide/batch", json={"states": [{"task_description": "t"}], "extra": 1}), 422, "extra")
    bad = _feedback("fb-unknown")
    bad["steps"][0]["plan_vaild"] = True
    _refused(direct.post("/v1/feedback", json=bad), 422, "steps[0].plan_vaild")


def test_unknown_routes_and_methods_answer_in_the_shape(direct):
    _refused(direct.get("/v1/nope"), 404)
    _refused(direct.get("/v1/decide"), 405)


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda b: b["steps"][1]["state"].update(plan="\ud800"), "steps[1].state.plan"),
    (lambda b: b.update(task_id="t\udc00"), "task_id"),
    (lambda b: b["steps"][1].update(agent_message="\ud83d"), "steps[1].agent_message"),
    (lambda b: b["steps"][1].update(tokens_in=2**63), "steps[1].tokens_in"),
    (lambda b: b.update(seed=-(2**64)), "seed"),
    (lambda b: b["steps"][1].update(cost_usd=float("nan")), "body"),
    (lambda b: b["steps"][1].update(latency_ms=-1.0), "steps[1].latency_ms"),
    (lambda b: b["steps"][1].update(decided_by="oracle-ish"), "steps[1].decided_by"),
    (lambda b: b["steps"][1].update(step=0), "steps"),
])
def test_bad_feedback_is_422_and_nothing_is_stored(cluster, direct, mutate, field):
    body = _feedback("fb-hostile")
    mutate(body)
    _refused(_raw(direct, "/v1/feedback", json.dumps(body).encode()), 422, field)


def test_feedback_conflict_is_409_and_the_run_still_builds_a_dataset(cluster, direct, tmp_path):
    from rollout.store import TrajectoryStore
    from train.dataset import BuildConfig, build_dataset

    body = _feedback("fb-conflict")
    first = direct.post("/v1/feedback", json=body).json()
    assert first["stored"] is True
    assert direct.post("/v1/feedback", json=body).json()["stored"] is False  # the same again: idempotent
    changed = _feedback("fb-conflict")
    changed["steps"][1]["agent_id"] = 14
    _refused(direct.post("/v1/feedback", json=changed), 409, "episode_id")
    episodes = TrajectoryStore(str(cluster.store)).read_episodes(["serve-feedback"])
    assert not {e.episode_id for e in episodes if e.episode_id.endswith(":fb-hostile")}  # no refused post stored
    # stored once, with the service's verdict: the claimed success does not validate
    assert [e.success_validator for e in episodes if e.episode_id == first["stored_id"]] == [False]
    from tests.trajectories import make_episodes

    # the run still reads back whole and builds a dataset (with accepted episodes from elsewhere)
    card = build_dataset(episodes + make_episodes("other", 10), tmp_path / "ds",
                         BuildConfig(tokenizer_dir="", augment_copies=0))
    assert card is not None and (tmp_path / "ds" / "dataset_card.json").is_file()


def test_decision_keys_get_403_on_admin_routes(cluster, direct, admin_auth):
    _refused(direct.get("/v1/admin/model"), 403)
    _refused(direct.post("/v1/admin/model", json={"model": str(cluster.models.v2)}), 403)
    _refused(direct.post("/v1/admin/rollback"), 403)
    assert httpx.get(f"{cluster.direct_url}/v1/admin/model", headers=admin_auth, timeout=30).status_code == 200
    assert direct.get("/readyz").json()["version"] == "v1"  # nothing changed


def test_key_rules(monkeypatch, tmp_path):
    from serve.config import ConfigError, ServeConfig

    with pytest.raises(ConfigError, match="16 characters"):
        ServeConfig(api_keys=["abcdefgh"]).validate()
    monkeypatch.setenv("HALO_SERVE_API_KEYS", "x")
    with pytest.raises(ConfigError, match="HALO_SERVE_API_KEYS"):
        ServeConfig().validate()
    monkeypatch.setenv("HALO_SERVE_API_KEYS", "")
    monkeypatch.setenv("HALO_SERVE_ADMIN_KEYS", "root=tooshort")
    with pytest.raises(ConfigError, match="HALO_SERVE_ADMIN_KEYS"):
        ServeConfig().validate()
    monkeypatch.setenv("HALO_SERVE_ADMIN_KEYS", "")
    with pytest.raises(ConfigError, match="--insecure"):
        ServeConfig(host="0.0.0.0").check_exposure()
    assert "WARNING" in ServeConfig(host="0.0.0.0", insecure=True).check_exposure()
    assert "WARNING" in ServeConfig().check_exposure()  # loopback without keys: allowed, warned
    assert ServeConfig(host="0.0.0.0", api_keys=["a" * 16]).check_exposure() == ""


def test_keys_rotate_from_the_key_file(tmp_path):
    import os

    from serve.guard import KeyRing

    path = tmp_path / "keys"
    from serve.keys import KeyIdentity

    path.write_text("decision planner-a=decision-key-aaaaaaaa\nadmin ops=admin-key-bbbbbbbbbbbb\n")
    ring = KeyRing(key_file=str(path))
    assert ring.lookup(b"decision-key-aaaaaaaa") == KeyIdentity("planner-a", frozenset({"decision"}))
    assert ring.lookup(b"admin-key-bbbbbbbbbbbb") == KeyIdentity("ops", frozenset({"admin"}))
    path.write_text("decision planner-b=decision-key-cccccccc\n")
    os.utime(path, (time.time() + 5, time.time() + 5))
    ring._checked = 0.0  # the file is looked at once a second
    assert ring.lookup(b"decision-key-aaaaaaaa") is None
    assert ring.lookup(b"decision-key-cccccccc") == KeyIdentity("planner-b", frozenset({"decision"}))
    path.write_text("decision short=abc\n")  # a file with no valid key keeps the keys in force
    os.utime(path, (time.time() + 10, time.time() + 10))
    ring._checked = 0.0
    assert ring.lookup(b"decision-key-cccccccc") == KeyIdentity("planner-b", frozenset({"decision"}))


def test_rate_limit_per_key():
    from serve.guard import RateLimiter

    limiter = RateLimiter(rate=5.0, burst=2.0)
    assert limiter.acquire("a") == 0.0 and limiter.acquire("a") == 0.0
    wait = limiter.acquire("a")
    assert 0.0 < wait <= 0.2
    assert limiter.acquire("b") == 0.0  # per key
    time.sleep(wait + 0.01)
    assert limiter.acquire("a") == 0.0


def test_request_ids_and_traceparent(direct):
    r = direct.post("/v1/decide", json=symptom_state(0).to_dict(), headers={
        "X-Request-ID": "planner-42.abc", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
    assert r.headers["x-request-id"] == "planner-42.abc"
    generated = {direct.post("/v1/decide", json=symptom_state(0).to_dict()).headers["x-request-id"] for _ in range(3)}
    assert len(generated) == 3 and all(len(g) >= 16 for g in generated)
    refused = direct.post("/v1/decide", json={"task_description": 1}, headers={"X-Request-ID": "planner-43"})
    assert refused.status_code == 422 and refused.headers["x-request-id"] == "planner-43"


def _counter(text: str, name: str, label: str) -> float:
    prefix = f'{name}{{{label}}} '
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def test_metrics_count_each_refusal_once_and_disconnects_as_such(cluster, direct, admin_auth):
    admin = httpx.Client(base_url=cluster.direct_url, headers=admin_auth, timeout=60)
    before = direct.get("/metrics").text
    r = admin.post("/v1/admin/model", json={"model": str(cluster.models.bad)})
    assert r.json()["error"] == "manifest_invalid"
    u = urlparse(cluster.direct_url)
    with socket.create_connection((u.hostname, u.port)) as s:  # a body that never comes, then gone
        s.sendall(b"POST /v1/decide HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"authorization: Bearer test-key-0123456789\r\ncontent-length: 100\r\n\r\n{\"task")
        time.sleep(0.3)
    time.sleep(0.5)
    after = direct.get("/metrics").text
    assert _counter(after, "halo_serve_errors_total", 'kind="manifest_invalid"') - \
        _counter(before, "halo_serve_errors_total", 'kind="manifest_invalid"') == 1
    assert _counter(after, "halo_serve_errors_total", 'kind="invalid_request"') == \
        _counter(before, "halo_serve_errors_total", 'kind="invalid_request"')
    assert _counter(after, "halo_serve_errors_total", 'kind="client_disconnect"') >= \
        _counter(before, "halo_serve_errors_total", 'kind="client_disconnect"') + 1
    assert _counter(after, "halo_serve_errors_total", 'kind="internal"') == 0
    assert "test-key-0123456789" not in after
    admin.close()


def test_200_stalled_clients_cost_only_their_own_requests(cluster, auth):
    u = urlparse(cluster.direct_url)
    stall_key = STALL_KEY.split("=", 1)[1]
    stalled: list[socket.socket] = []
    try:
        for i in range(200):
            s = socket.create_connection((u.hostname, u.port))
            if i % 2:  # headers sent, body stalls
                s.sendall(b"POST /v1/decide HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                          b"authorization: Bearer " + stall_key.encode() + b"\r\ncontent-length: 5000\r\n\r\n{")
            else:  # headers stall half-way
                s.sendall(b"POST /v1/decide HTTP/1.1\r\nhost: x\r\nauthoriz")
            stalled.append(s)
        time.sleep(0.5)
        worst = 0.0
        with httpx.Client(timeout=5) as c:
            for _ in range(5):
                for url, headers, body in ((f"{cluster.direct_url}/healthz", {}, None),
                                           (f"{cluster.direct_url}/readyz", {}, None),
                                           (f"{cluster.direct_url}/v1/decide", auth, symptom_state(2).to_dict()),
                                           (f"{cluster.url}/readyz", {}, None)):
                    t0 = time.perf_counter()
                    r = c.post(url, json=body, headers=headers) if body else c.get(url)
                    worst = max(worst, time.perf_counter() - t0)
                    assert r.status_code == 200, (url, r.text)
        assert worst < 1.0, f"slowest answer {worst:.3f} s with 200 stalled clients"
        # a stalled upload holds no in-flight slot of its key: the staller's key still answers
        r = httpx.post(f"{cluster.direct_url}/v1/decide", json=symptom_state(0).to_dict(),
                       headers={"Authorization": f"Bearer {stall_key}"}, timeout=5)
        assert r.status_code == 200, r.text
    finally:
        for s in stalled:
            s.close()

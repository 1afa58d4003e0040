"""Model versions on a running service: rollout under a steady trickle loses no request, rollback,
and a model whose manifest does not verify is refused while the old one keeps serving."""

from __future__ import annotations

import time

import httpx
import pytest
from serve_synthetic import MAP_V1, MAP_V2, symptom_state
from trickle import Trickle


@pytest.fixture(scope="module")
def client(cluster, admin_auth):
    with httpx.Client(base_url=cluster.url, headers=admin_auth, timeout=60) as c:
        yield c


def _wait_all_replicas(client, version: str, timeout_s: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.get("/v1/admin/model").json()
        live = {rid: r for rid, r in status["replicas"].items() if r["alive"]}
        if len(live) >= 2 and all(r["version"] == version for r in live.values()):
            return status
        time.sleep(0.1)
    raise TimeoutError(f"replicas did not all reach {version}: {status['replicas']}")


def _answers_consistent(outcomes) -> None:
    """Every answer is what the version that answered says it should be."""
    maps = {"v1": MAP_V1, "v2": MAP_V2}
    for o in outcomes:
        assert o.agent_id == maps[o.version][o.symptom], o


def test_rollout_rollback_and_bad_manifest_under_trickle(cluster, client, auth):
    _wait_all_replicas(client, "v1")
    with Trickle(cluster.url, auth) as trickle:
        trickle.wait_for(20)
        r = client.post("/v1/admin/model", json={"model": str(cluster.models.v2)})
        assert r.status_code == 200, r.text
        assert r.json()["target"]["version"] == "v2"
        _wait_all_replicas(client, "v2")
        switched = len(trickle.snapshot()) + trickle.workers  # skip requests already in flight
        trickle.wait_for(30)
        assert client.get("/readyz").json()["version"] == "v2"

        # a manifest that does not verify is refused; v2 keeps serving
        r = client.post("/v1/admin/model", json={"model": str(cluster.models.bad)})
        assert r.status_code == 422 and r.json()["error"] == "manifest_invalid"
        assert "distinct" in r.json()["detail"]
        r = client.post("/v1/admin/model", json={"model": str(cluster.models.bad) + "-missing"})
        assert r.status_code == 422 and r.json()["error"] == "model_load_failed"
        trickle.wait_for(20)
        assert client.get("/v1/admin/model").json()["target"]["version"] == "v2"
        refused = len(trickle.snapshot())

        r = client.post("/v1/admin/rollback")
        assert r.status_code == 200 and r.json()["target"]["version"] == "v1"
        _wait_all_replicas(client, "v1")
        rolled_back = len(trickle.snapshot()) + trickle.workers
        trickle.wait_for(20)
    outcomes = trickle.snapshot()
    assert trickle.failures() == []
    assert len(outcomes) > 90
    _answers_consistent(outcomes)
    assert {o.version for o in outcomes[switched:refused]} == {"v2"}
    assert {o.version for o in outcomes[rolled_back:]} == {"v1"}
    history = client.get("/v1/admin/model").json()["history"]
    assert [h["action"] for h in history][-2:] == ["deploy", "rollback"]
    # only v1 is left: a second rollback has nowhere to go
    r = client.post("/v1/admin/rollback")
    assert r.status_code == 409
    assert client.post("/v1/decide", json=symptom_state(0).to_dict()).json()["agent_id"] == MAP_V1[0]


def test_service_refuses_to_start_on_a_bad_manifest(cluster):
    from serve.config import ServeConfig
    from serve.launcher import start_service
    from train.manifest import ManifestError

    cfg = ServeConfig(model=str(cluster.models.bad), port=cluster.port, app_name="never", route_prefix="/never",
                      registry_name="reg-never")
    with pytest.raises(ManifestError, match="distinct"):
        start_service(cfg)
    from ray import serve

    assert "never" not in serve.status().applications
    assert httpx.get(f"{cluster.url}/readyz").status_code == 200


def _copy_model(src, dest, version: str, edit=None):
    import json
    import shutil

    shutil.copytree(src, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["version"] = version
    if edit is not None:
        edit(manifest)
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def test_wrongly_typed_manifest_is_refused_and_rollback_skips_failed_versions(cluster, client, tmp_path):
    import ray

    _wait_all_replicas(client, "v1")
    # a wrong type that verified before (the label map was fine): every decision would have been a 500
    typed = _copy_model(cluster.models.v1, tmp_path / "typed", "v-typed", lambda m: m.update(version=7))
    r = client.post("/v1/admin/model", json={"model": str(typed)})
    assert r.status_code == 422 and r.json()["error"] == "manifest_invalid" and "version" in r.json()["detail"]
    other = _copy_model(cluster.models.v1, tmp_path / "typed2", "v-typed2", lambda m: m.update(metrics=["x"]))
    assert client.post("/v1/admin/model", json={"model": str(other)}).json()["error"] == "manifest_invalid"
    assert client.post("/v1/decide", json=symptom_state(0).to_dict()).json()["policy_version"] == "v1"

    # a version promoted straight into the registry (the loop's path) whose weights are broken:
    # its manifest verifies, the replicas fail to load it and keep v1; it is marked failed
    broken = _copy_model(cluster.models.v1, tmp_path / "broken", "v-broken")
    (broken / "weights.npz").write_bytes(b"not a numpy archive")
    registry = ray.get_actor("reg-main", namespace="halo")
    ray.get(registry.deploy.remote(str(broken), {"name": "broken", "version": "v-broken",
                                                 "policy_class": "hashed_linear"}))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        replicas = [r for r in client.get("/v1/admin/model").json()["replicas"].values() if r["alive"]]
        if len(replicas) >= 2 and all(r["load_error"] for r in replicas):
            break
        time.sleep(0.2)
    assert all("v-broken" in r["load_error"] or "broken" in r["load_error"] for r in replicas), replicas
    assert client.get("/readyz").json()["version"] == "v1"
    assert client.post("/v1/decide", json=symptom_state(1).to_dict()).json()["agent_id"] == MAP_V1[1]

    r = client.post("/v1/admin/model", json={"model": str(cluster.models.v2)})
    assert r.status_code == 200, r.text
    _wait_all_replicas(client, "v2")
    r = client.post("/v1/admin/rollback")  # not to v-broken, which no replica could load
    assert r.status_code == 200 and r.json()["target"]["version"] == "v1", r.json()["target"]
    _wait_all_replicas(client, "v1")
    assert [e["version"] for e in ray.get(registry.status.remote())["history"] if e["action"] == "deploy"][-2:] == \
        ["v-broken", "v2"]

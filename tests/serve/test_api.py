"""The HTTP API against a real Ray Serve on 127.0.0.1: decisions, auth, bad input, OpenAPI, metrics,
feedback, and the student clients (HTTP and DeploymentHandle)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from serve_synthetic import MAP_V1, SYMPTOMS, rule_state, symptom_state

from rollout.core.state import EpisodeState
from rollout.policies.rules import RulesFirst
from train.policies import load_policy


@pytest.fixture(scope="module")
def client(cluster, auth):
    with httpx.Client(base_url=cluster.url, headers=auth, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster, admin_auth):
    with httpx.Client(base_url=cluster.url, headers=admin_auth, timeout=30) as c:
        yield c


def _states() -> list[EpisodeState]:
    states = [symptom_state(i, task=t, step=t % 4) for t in range(5) for i in range(len(SYMPTOMS))]
    return states + [rule_state(k) for k in ("empty", "valid", "syntax")]


def test_decisions_match_the_in_process_policy(cluster, client):
    local = RulesFirst(load_policy(cluster.models.v1))
    states = _states()
    for state in states:
        r = client.post("/v1/decide", json=state.to_dict())
        assert r.status_code == 200, r.text
        body = r.json()
        want = local.decide(state)
        assert body["agent_id"] == want.agent_id
        assert body["decided_by"] == ("rule" if want.decided_by == "rule" else "model")
        assert body["policy_version"] == "v1"
        assert body["agent_name"] == want.agent_name
    # the learned map, not just agreement: model decisions follow the training data
    assert [client.post("/v1/decide", json=symptom_state(i).to_dict()).json()["agent_id"]
            for i in range(len(SYMPTOMS))] == list(MAP_V1)
    batch = client.post("/v1/decide/batch", json={"states": [s.to_dict() for s in states]})
    assert batch.status_code == 200
    assert [d["agent_id"] for d in batch.json()["decisions"]] == [local.decide(s).agent_id for s in states]
    assert batch.json()["policy_version"] == "v1"


def test_rules_layer_answers_without_the_model(client):
    for kind, agent in (("empty", 2), ("valid", 11), ("syntax", 9)):
        body = client.post("/v1/decide", json=rule_state(kind).to_dict()).json()
        assert (body["agent_id"], body["decided_by"]) == (agent, "rule")


def test_auth_required_except_probes(cluster):
    state = symptom_state(0).to_dict()
    r = httpx.post(f"{cluster.url}/v1/decide", json=state)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert r.json()["error"] == "unauthorized"
    r = httpx.post(f"{cluster.url}/v1/decide", json=state, headers={"Authorization": "Bearer wrong-key-000000"})
    assert r.status_code == 401
    r = httpx.post(f"{cluster.url}/v1/decide", json=state, headers={"Authorization": "Basic dGVzdA=="})
    assert r.status_code == 401
    assert httpx.post(f"{cluster.url}/v1/admin/rollback").status_code == 401
    assert httpx.get(f"{cluster.url}/healthz").status_code == 200
    assert httpx.get(f"{cluster.url}/readyz").json()["version"] == "v1"


@pytest.mark.parametrize(("body", "field"), [
    ({"domain": "(define (domain d))"}, "task_description"),
    ({"task_description": 3}, "task_description"),
    ({"task_description": "t", "plan_valid": "yes"}, "plan_valid"),
    ({"task_description": "t", "step": "2"}, "step"),
    ({"task_description": "t", "history": [1, "x"]}, "history[1]"),
    ({"task_description": "t", "history": [True]}, "history[0]"),
    ([1, 2], "body"),
])
def test_bad_state_is_422_naming_the_field(client, body, field):
    r = client.post("/v1/decide", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


def test_malformed_and_oversized_bodies(cluster, client, admin):
    r = client.post("/v1/decide", content=b'{"task_description": ', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["field"] == "body"
    r = client.post("/v1/decide", content=b"", headers={"content-type": "application/json"})
    assert r.status_code == 422
    big = {"task_description": "x" * 70_000}
    r = client.post("/v1/decide", json=big)
    assert r.status_code == 413 and r.json()["error"] == "too_large"

    def chunks():
        yield b'{"task_description": "'
        for _ in range(20):
            yield b"y" * 5000
        yield b'"}'

    r = client.post("/v1/decide", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    r = client.post("/v1/decide/batch", json={"states": [{"task_description": "a"}, {"task_description": "b",
                                                                                    "plan_valid": 1}]})
    assert r.status_code == 422 and r.json()["field"] == "states[1].plan_valid"
    assert client.post("/v1/decide/batch", json={"states": []}).json()["field"] == "states"
    r = client.post("/v1/decide/batch", json={"states": [{"task_description": "a"}] * 257})
    assert r.status_code == 422 and r.json()["field"] == "states"
    assert admin.post("/v1/admin/model", json={}).json()["field"] == "model"


def test_openapi_matches_the_routes(cluster, client, admin):
    doc = httpx.get(f"{cluster.url}/openapi.json").json()
    documented = {(path, method.upper()) for path, ops in doc["paths"].items() for method in ops}
    assert documented == {
        ("/v1/decide", "POST"), ("/v1/decide/batch", "POST"), ("/v1/feedback", "POST"),
        ("/v1/admin/model", "GET"), ("/v1/admin/model", "POST"), ("/v1/admin/rollback", "POST"),
        ("/v1/plans", "POST"), ("/v1/plans/{job_id}", "GET"), ("/v1/plans/{job_id}", "DELETE"),
        ("/v1/plans/{job_id}/events", "GET"),
        ("/healthz", "GET"), ("/readyz", "GET"), ("/metrics", "GET")}
    for path, method in documented:
        c = admin if path.startswith("/v1/admin/") else client
        if "{job_id}" in path:  # no such job: 404 in the API's error shape
            assert c.request(method, path.replace("{job_id}", "plan-none")).json()["error"] == "not_found", path
        elif method == "GET":
            assert c.get(path).status_code == 200, path
        elif path != "/v1/admin/rollback":  # rollback is exercised in test_updates
            assert c.request(method, path, json={}).status_code == 422, path
    state = doc["components"]["schemas"]["StateIn"]
    assert state["required"] == ["task_description"]
    assert set(state["properties"]) == set(EpisodeState.__dataclass_fields__)
    decide = doc["paths"]["/v1/decide"]["post"]
    assert decide["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/StateIn")
    assert {"401", "408", "413", "422", "429", "503"} <= set(decide["responses"])
    assert decide["security"] == [{"bearerAuth": []}]
    plans = doc["paths"]["/v1/plans"]["post"]
    assert {"202", "401", "408", "409", "413", "422", "429", "503"} <= set(plans["responses"])
    assert any(p["name"] == "idempotency-key" and p["in"] == "header" for p in plans["parameters"])
    assert {"200", "404", "503"} <= set(doc["paths"]["/v1/plans/{job_id}"]["get"]["responses"])
    assert "text/event-stream" in doc["paths"]["/v1/plans/{job_id}/events"]["get"]["responses"]["200"]["content"]
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert set(doc["components"]["schemas"]["DecisionOut"]["properties"]) >= {
        "agent_id", "agent_name", "decided_by", "policy_version", "latency_ms"}


def test_metrics_count_requests_decisions_and_errors(cluster, client):
    client.post("/v1/decide", json=rule_state("empty").to_dict())
    client.post("/v1/decide", json=symptom_state(1).to_dict())
    httpx.post(f"{cluster.url}/v1/decide", json={})  # unauthorized
    # Any replica answers /metrics with every replica's counters as of their last sync with the
    # registry: the one that counted a request may not have synced yet.
    deadline = time.monotonic() + 30
    text = client.get("/metrics").text
    counted = ('kind="unauthorized"', 'kind="invalid_request"', "AgentEmergency", 'decided_by="model"')
    while not all(c in text for c in counted) and time.monotonic() < deadline:
        time.sleep(0.5)
        text = client.get("/metrics").text
    assert 'halo_serve_decisions_total{agent_id="2",agent_name="AgentEmergency",decided_by="rule"}' in text
    assert 'decided_by="model"' in text
    assert 'halo_serve_errors_total{kind="unauthorized"}' in text
    assert 'halo_serve_errors_total{kind="invalid_request"}' in text
    assert 'halo_serve_request_latency_seconds_bucket{le="0.005",route="/v1/decide"}' in text
    assert "halo_serve_rule_decision_share " in text
    assert 'halo_serve_requests_total{code="200",route="/v1/decide"}' in text
    share = float(next(line.split()[-1] for line in text.splitlines()
                       if line.startswith("halo_serve_rule_decision_share ")))
    assert 0.0 < share < 1.0


def _feedback(episode_id: str) -> dict:
    steps = [{"step": 0, "state": rule_state("empty").to_dict(), "agent_id": 2, "decided_by": "rule"},
             {"step": 1, "state": symptom_state(0).to_dict(), "agent_id": 13, "decided_by": "model",
              "plan_found": True, "plan_valid": True, "plan_after": "(stack a b)\n", "llm_calls": 0}]
    return {"episode_id": episode_id, "llm_backend": "sim", "success_validator": True, "success_oracle": None,
            "task_id": "syn/blocks/0", "family": "classical", "domain_name": "blocks", "steps": steps}


def test_feedback_is_stored_once(cluster, client):
    from rollout.store import TrajectoryStore

    r = client.post("/v1/feedback", json=_feedback("fb-1"))
    assert r.status_code == 200, r.text
    answer = r.json()
    stored_id = answer["stored_id"]
    assert stored_id.endswith(":fb-1") and stored_id.startswith("key-")  # namespaced by the (unnamed) key
    # the claimed success does not hold: "(stack a b)" is no valid plan of this state's PDDL
    assert answer == {"episode_id": "fb-1", "stored": True, "steps": 2, "stored_id": stored_id,
                      "verdict": "serve-feedback:disagrees"}
    again = client.post("/v1/feedback", json=_feedback("fb-1"))
    assert again.status_code == 200 and again.json()["stored"] is False
    # other tests' student rollouts may share this feedback run: look at fb-1 alone
    episodes = [e for e in TrajectoryStore(str(cluster.store)).read_episodes(["serve-feedback"])
                if e.episode_id == stored_id]
    assert len(episodes) == 1
    ep = episodes[0]
    assert ep.llm_backend == "sim" and ep.success_validator is False and ep.model_version == "v1"
    assert ep.code_version == "serve-feedback:disagrees"
    assert [(s.agent_id, s.is_hardcoded) for s in ep.steps] == [(2, True), (13, False)]
    assert EpisodeState.from_json(ep.steps[1].state_json) == symptom_state(0)
    bad = _feedback("fb-2")
    del bad["success_validator"]
    r = client.post("/v1/feedback", json=bad)
    assert r.status_code == 422 and r.json()["field"] == "success_validator"
    bad = _feedback("fb-3")
    bad["steps"][1]["state"]["plan_valid"] = "true"
    assert client.post("/v1/feedback", json=bad).json()["field"] == "steps[1].state.plan_valid"


def test_student_http_policy(cluster, monkeypatch):
    from rollout.policies import make_policy
    from rollout.policies.http_student import StudentHTTPPolicy, StudentServiceError

    monkeypatch.setenv("HALO_SERVE_API_KEY", "test-key-0123456789")
    policy = make_policy(f"rules+student:{cluster.url}")
    local = RulesFirst(load_policy(cluster.models.v1))
    for state in _states():
        assert policy.decide(state).agent_id == local.decide(state).agent_id
    student = make_policy(f"student:{cluster.url}")
    d = student.decide(symptom_state(2))
    assert (d.agent_id, d.decided_by, d.policy_version) == (MAP_V1[2], "model", "v1")

    async def many():
        return await asyncio.gather(*(student.adecide(symptom_state(i % 4, task=i)) for i in range(12)))

    assert [d.agent_id for d in asyncio.run(many())] == [MAP_V1[i % 4] for i in range(12)]
    student.close()
    wrong = StudentHTTPPolicy(cluster.url, api_key="not-the-key-000", retries=3)
    with pytest.raises(StudentServiceError) as err:
        wrong.decide(symptom_state(0))
    assert err.value.status == 401
    down = StudentHTTPPolicy("http://127.0.0.1:9", retries=1, backoff_s=0.01, timeout=1)
    with pytest.raises(StudentServiceError, match="unreachable"):
        down.decide(symptom_state(0))


def test_deployment_handle_policy(cluster):
    from serve.handle_policy import ServeHandlePolicy

    policy = ServeHandlePolicy(app_name="main")
    local = RulesFirst(load_policy(cluster.models.v1))
    for state in _states()[:8]:
        d = policy.decide(state)
        assert d.agent_id == local.decide(state).agent_id
        assert d.policy_version == "v1"


def test_config_file_round_trip(tmp_path):
    from serve.config import ConfigError, ServeConfig

    path = tmp_path / "serve.yaml"
    path.write_text("model: /m\nport: 9001\nautoscaling_config: {min_replicas: 1, max_replicas: 4}\n")
    cfg = ServeConfig.load(path, port=9002)
    assert (cfg.model, cfg.port, cfg.autoscaling_config["max_replicas"]) == ("/m", 9002, 4)
    path.write_text("modle: /m\n")
    with pytest.raises(ConfigError, match="modle"):
        ServeConfig.load(path)
    with pytest.raises(ConfigError, match="api_keys"):
        ServeConfig(api_keys=["short"]).validate()
    assert json.loads(json.dumps(ServeConfig().to_dict()))["host"] == "127.0.0.1"
    assert ServeConfig().access_log is False  # access logs off by default: /metrics counts requests
    with pytest.raises(ConfigError, match="log_level"):
        ServeConfig(log_level="LOUD").validate()

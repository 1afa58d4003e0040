"""/v1/plans end to end on real Ray and Serve: the served orchestrator (rules + the v1 model through a
DeploymentHandle), the simulated agents sleeping their latency in real time, the real planner and
validator in the sandbox, the trajectory store on disk.

Covers: a job that succeeds with a plan the validator accepts (and its events and feedback
episode), idempotency, cancel, budgets that run out, per-key job limits, a service restart in the
middle of a job (it resumes; no step runs twice; it ends where the uninterrupted job ends), and
hostile bodies (4xx, or a failed job; never a 5xx or a stuck runner)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from serve_keys import API_KEY, STALL_KEY

from serve.client import DecisionServiceError, PlanClient, PlanJob

OTHER_TOKEN = STALL_KEY.split("=", 1)[1]
# instance-2 with seed 9: seven steps with the v1 model, ending in a validated plan; seed 1: three.
LONG = {"task_description": "Stack the blocks as asked.", "task_id": "planbench/blocksworld/instance-2", "seed": 9}
SHORT = {**LONG, "seed": 1}
# instance-3 with seed 2: the v1 model never repairs it, one LLM call a step; it runs until its budget stops it.
ENDLESS = {"task_description": "Stack the blocks as asked.", "task_id": "planbench/blocksworld/instance-3", "seed": 2}
SIM_LLM = "sim:realtime=1,latency_ms=250,latency_sigma=0.1"


def _config(models, port: int, store: str):
    from serve.config import ServeConfig

    return ServeConfig(model=str(models.v1), port=port, app_name="plans", route_prefix="/plans", num_replicas=1,
                       replica_num_cpus=0, registry_name="reg-plans", api_keys=[API_KEY, STALL_KEY],
                       plan_store=store, plan_llm=SIM_LLM, plan_max_jobs_per_key=4, plan_max_jobs=8,
                       plan_max_running=8, max_inflight_per_client=32)


@pytest.fixture(scope="module")
def plans(cluster, tmp_path_factory) -> Iterator[dict]:
    from serve.launcher import start_service, stop_service

    store = str(tmp_path_factory.mktemp("plan-store"))
    config = _config(cluster.models, cluster.port, store)
    service = start_service(config)
    box = {"service": service, "config": config, "store": store}
    try:
        yield box
    finally:
        import ray

        if ray.is_initialized():  # the package's Ray may be gone already (tests/serve/conftest.py)
            stop_service(box["service"])


def _client(plans, token: str = API_KEY) -> PlanClient:
    return PlanClient(plans["service"].url, api_key=token, timeout=30)


def _post(plans, body: dict, key: str | None = None, token: str = API_KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(f"{plans['service'].url}/v1/plans", json=body, headers=headers, timeout=30)


def test_a_plan_job_succeeds_with_a_plan_the_validator_accepts(plans):
    import solvers
    from rollout.store import TrajectoryStore

    progress: list[PlanJob] = []
    with _client(plans) as client:
        job = client.plan(SHORT, timeout_s=120, on_progress=progress.append)
        events = httpx.get(f"{plans['service'].url}/v1/plans/{job.id}/events",
                           headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30).text
    assert job.status == "succeeded", job.error
    assert job.validated and job.plan.strip() and job.error == ""
    assert solvers.validate(job.domain, job.problem, job.plan).valid  # the validator, again, here
    assert [s["agent_id"] for s in job.steps][-2:] == [11, 12]  # NoOp on the valid plan, then rendered
    assert job.oracle is True and job.natural_language_plan
    assert progress[-1].status == "succeeded" and len(progress) >= 2
    blocks = [b for b in events.strip().split("\n\n") if b]
    assert [b.split("\n")[0] for b in blocks] == ["event: step"] * len(job.steps) + ["event: end"]
    assert json.loads(blocks[-1].split("data: ", 1)[1])["status"] == "succeeded"
    stored = {e.episode_id: e for e in TrajectoryStore(plans["store"]).read_episodes(["serve-plans"])}
    episode = next(e for e in stored.values() if e.episode_id.endswith(f":{job.id}"))  # KEY_NAME:job id
    assert episode.code_version == "serve-feedback:verified" and episode.success_validator
    assert [s.agent_id for s in episode.steps] == [s["agent_id"] for s in job.steps]


def test_the_same_idempotency_key_and_body_is_one_job_a_different_body_is_409(plans):
    first = _post(plans, SHORT, key="order-17")
    again = _post(plans, SHORT, key="order-17")
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"] and again.headers.get("idempotent-replayed") == "true"
    changed = _post(plans, {**SHORT, "seed": 2}, key="order-17")
    assert changed.status_code == 409 and changed.json()["error"] == "conflict"
    assert changed.json()["field"] == "Idempotency-Key"
    other_key = _post(plans, SHORT, key="order-17", token=OTHER_TOKEN)  # keys do not share job IDs
    assert other_key.status_code == 202 and other_key.json()["id"] != first.json()["id"]
    with _client(plans) as client:
        assert client.wait(first.json()["id"], timeout_s=120).status == "succeeded"
    with _client(plans, OTHER_TOKEN) as other:
        with pytest.raises(DecisionServiceError) as caught:  # another key's job does not exist for you
            other.job(first.json()["id"])
        assert caught.value.status == 404
        other.wait(other_key.json()["id"], timeout_s=120)


def test_a_cancelled_job_stops_and_stays_cancelled(plans):
    with _client(plans) as client:
        job = client.plan_async({**ENDLESS, "budget": {"max_steps": 30}})
        deadline = time.monotonic() + 60
        while not client.job(job.id).steps and time.monotonic() < deadline:
            time.sleep(0.2)
        running = client.job(job.id)
        assert running.status == "running" and 1 <= (running.poll_after_s or 0) <= 10  # when to look again
        cancelled = client.cancel(job.id)
        assert cancelled.status == "cancelled" and cancelled.error == "cancelled by the client"
        steps = len(cancelled.steps)
        time.sleep(1.5)  # several simulated LLM latencies: a job still running would have moved
        later = client.job(job.id)
        assert later.status == "cancelled" and len(later.steps) == steps and later.poll_after_s is None
        assert client.cancel(job.id).status == "cancelled"  # cancelling again changes nothing


@pytest.mark.parametrize("budget, reason", [({"max_llm_calls": 2}, "max_llm_calls=2"),
                                            ({"max_usd": 0.0001}, "max_usd=0.0001"),
                                            ({"max_seconds": 1.0}, "max_seconds=1")])
def test_a_budget_that_runs_out_fails_the_job_with_the_reason(plans, budget, reason):
    with _client(plans) as client:
        job = client.plan({**ENDLESS, "budget": {"max_steps": 30, **budget}}, timeout_s=120)
    assert job.status == "failed" and job.plan == "" and not job.validated
    assert job.error.startswith("budget exhausted") and reason in job.error, job.error
    if "max_llm_calls" in budget:
        assert job.llm_calls <= 3  # it stops at the first step past the budget


def test_a_key_over_its_unfinished_jobs_gets_429_and_the_others_are_unaffected(plans):
    with _client(plans) as client:
        jobs = [client.plan_async({**ENDLESS, "task_description": f"job {i}", "budget": {"max_steps": 30}})
                for i in range(4)]
        refused = _post(plans, {**ENDLESS, "task_description": "job 5"}, key="one-too-many")
        assert refused.status_code == 429 and refused.json()["error"] == "too_many_jobs"
        assert int(refused.headers["retry-after"]) >= 1
        assert _post(plans, SHORT, key="other-key-job", token=OTHER_TOKEN).status_code == 202
        for job in jobs:
            client.cancel(job.id)
        assert _post(plans, {**ENDLESS, "budget": {"max_steps": 1}}, key="after").status_code == 202


def test_a_service_restart_in_the_middle_resumes_the_job_and_runs_no_step_twice(plans):
    from serve.launcher import start_service, stop_service
    from serve.plan_jobs import PlanStore

    with _client(plans) as client:
        reference = client.plan({**LONG, "task_description": "reference run"}, idempotency_key="ref", timeout_s=180)
        job = client.plan_async({**LONG, "task_description": "interrupted run"}, idempotency_key="cut")
        deadline = time.monotonic() + 60
        while len(client.job(job.id).steps) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    stop_service(plans["service"])  # the runner (first) and the replica die mid-job
    before = len(PlanStore(plans["store"]).read_steps(job.id))
    assert 2 <= before < len(reference.steps)
    plans["service"] = start_service(plans["config"])
    with _client(plans) as client:
        final = client.wait(job.id, timeout_s=180)
    assert final.status == "succeeded" and final.resumed == 1
    assert [s["step"] for s in final.steps] == list(range(len(final.steps)))
    assert [s["agent_id"] for s in final.steps] == [s["agent_id"] for s in reference.steps]
    assert final.plan == reference.plan and final.llm_calls == reference.llm_calls
    docs = PlanStore(plans["store"]).read_steps(job.id)
    runners = [d["runner"] for d in docs]
    assert [d["record"]["step"] for d in docs] == list(range(len(final.steps)))  # each step stored once
    assert len(set(runners)) == 2 and runners == sorted(runners, key=runners.index)  # one runner, then the next
    assert runners.count(runners[0]) >= before


HUGE = "x" * 30_000


@pytest.mark.parametrize("body, status, field_name", [
    ({**SHORT, "task_description": HUGE}, 422, "task_description"),
    ({**SHORT, "domain": "(" * 100_001}, 422, "domain"),
    ({**SHORT, "task_id": "no/such/task"}, 422, "task_id"),
    ({"task_description": "no task id"}, 422, "task_id"),
    ({**SHORT, "budget": {"max_steps": 0}}, 422, "budget.max_steps"),
    ({**SHORT, "budget": {"max_seconds": 1e9}}, 422, "budget.max_seconds"),
    ({**SHORT, "budget": {"max_usd": "1"}}, 422, "budget.max_usd"),
    ({**SHORT, "surprise": 1}, 422, "surprise"),
])
def test_hostile_bodies_get_a_4xx_naming_the_field(plans, body, status, field_name):
    answer = _post(plans, body, key=f"hostile-{field_name}-{len(json.dumps(body))}")
    assert answer.status_code == status, answer.text
    assert answer.json()["field"] == field_name


def test_hostile_requests_never_5xx(plans):
    url, auth = plans["service"].url, {"Authorization": f"Bearer {API_KEY}"}
    too_big = httpx.post(f"{url}/v1/plans", content=b'{"task_description": "' + b"y" * 1_100_000 + b'"}',
                         headers={**auth, "content-type": "application/json"}, timeout=30)
    assert too_big.status_code == 413
    nested = httpx.post(f"{url}/v1/plans", content=b'{"budget": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                        headers={**auth, "content-type": "application/json"}, timeout=30)
    assert nested.status_code == 422
    long_key = _post(plans, SHORT, key="k" * 201)
    assert long_key.status_code == 422 and long_key.json()["field"] == "header.idempotency-key"
    for path in ("/v1/plans/plan-nope", "/v1/plans/" + "z" * 3000, "/v1/plans/plan-nope/events"):
        assert httpx.get(f"{url}{path}", headers=auth, timeout=30).status_code == 404
    assert httpx.delete(f"{url}/v1/plans/plan-nope", headers=auth, timeout=30).status_code == 404
    assert httpx.get(f"{url}/v1/plans/plan-nope", timeout=30).status_code == 401


def test_a_key_past_its_spending_limit_gets_refused_and_another_key_does_not(plans, tmp_path):
    import ray

    from serve.plan_runner import PlanRunner, PlanSettings

    settings = PlanSettings(store_url=str(tmp_path), app_name="plans", llm_spec=SIM_LLM, usd_per_key_per_hour=1e-6)
    runner = PlanRunner.options(name="spend-test-runner", namespace="halo").remote(settings)  # type: ignore[attr-defined]
    try:
        body = {**ENDLESS, "domain": "", "problem": "", "spec_json": None, "target_planner": "fd",
                "budget": {"max_steps": 2, "max_llm_calls": 40, "max_usd": 1.0, "max_seconds": 60.0}}
        first = ray.get(runner.submit.remote("spender", "a", body), timeout=60)
        assert first["created"]
        deadline = time.monotonic() + 60
        while ray.get(runner.job.remote(first["job"]["id"], "spender"))["cost_usd"] <= 0:
            assert time.monotonic() < deadline, "the job spent nothing"
            time.sleep(0.2)
        again = ray.get(runner.submit.remote("spender", "b", body), timeout=60)
        assert again["refused"]["outcome"] == "over_spend" and "spender" in again["refused"]["detail"]
        assert ray.get(runner.submit.remote("frugal", "b", body), timeout=60)["created"]
    finally:
        ray.kill(runner)


def test_the_plan_example_in_docs_serve_md_runs(plans):
    """The PlanClient example in docs/serve.md, as written (only the URL points at this service)."""
    import re
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text()
    block = next(b for b in re.finditer(r"```python\n(.*?)```", doc, re.S) if "PlanClient(" in b.group(1))
    code = textwrap.dedent(block.group(1)).replace("http://127.0.0.1:8000", plans["service"].url)
    env = {**__import__("os").environ, "HALO_SERVE_API_KEY": API_KEY}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].split()[0] in ("succeeded", "failed"), out.stdout

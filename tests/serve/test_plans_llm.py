"""/v1/plans with LLM agents (an OpenAI-protocol endpoint: tests/fake_openai.py, the test double for
a frontier API) starting from the request's own PDDL, which the real planner and validator read in
the sandbox: PDDL bombs (nesting tens of thousands deep, a grounding explosion) end as failed jobs
within their budget, never a 5xx or a stuck runner; the service keeps answering meanwhile."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from serve_keys import API_KEY
from serve_service import running_service

from serve.client import PlanClient

NESTED = "(" * 45_000 + ")" * 45_000
_PARAMS = " ".join(f"?v{i}" for i in range(8))
WIDE_DOMAIN = ("(define (domain wide) (:requirements :strips) (:predicates (p " + _PARAMS + ") (done))"
               " (:action a :parameters (" + _PARAMS + ") :precondition (p " + _PARAMS + ") :effect (done)))")
WIDE_PROBLEM = ("(define (problem wide) (:domain wide) (:objects " + " ".join(f"o{i}" for i in range(4000))
                + ") (:init) (:goal (done)))")


@pytest.fixture(scope="module")
def llm_plans(cluster, tmp_path_factory) -> Iterator[object]:
    from serve.config import ServeConfig
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        config = ServeConfig(model=str(cluster.models.v1), port=cluster.port, app_name="plansllm",
                             route_prefix="/plansllm", num_replicas=1, replica_num_cpus=0,
                             registry_name="reg-plansllm", api_keys=[API_KEY],
                             plan_store=str(tmp_path_factory.mktemp("plan-llm-store")),
                             plan_llm=f"openai:fake-model@{server.base_url}")
        with running_service(config) as service:
            yield service


@pytest.mark.parametrize("domain, problem", [(NESTED, NESTED), (WIDE_DOMAIN, WIDE_PROBLEM)],
                         ids=["nested-90k", "grounding-explosion"])
def test_pddl_bombs_end_as_failed_jobs_and_the_service_keeps_answering(llm_plans, domain, problem):
    url = llm_plans.fast_url  # type: ignore[attr-defined]
    body = {"task_description": "Do the thing.", "domain": domain, "problem": problem,
            "budget": {"max_steps": 3, "max_seconds": 45.0}}
    with PlanClient(url, api_key=API_KEY, timeout=30) as client:
        t0 = time.monotonic()
        job = client.plan_async(body)
        worst = 0.0
        while not (current := client.job(job.id)).done and time.monotonic() - t0 < 90:
            t1 = time.perf_counter()
            assert httpx.get(f"{url}/readyz", timeout=5).status_code == 200
            worst = max(worst, time.perf_counter() - t1)
            time.sleep(0.5)
        assert current.done, f"job still {current.status} after 90 s"
        assert current.status == "failed" and current.error and current.plan == ""
        assert time.monotonic() - t0 < 75  # max_seconds (45) plus the runner's own steps
        assert worst < 2.0, f"readyz took {worst:.2f} s during the bomb"
        after = client.plan({"task_description": "a plain request", "budget": {"max_steps": 1}}, timeout_s=120)
        assert after.done and after.status in ("succeeded", "failed")  # the runner still runs jobs

"""The plan jobs' LLM calls draw from the job-wide rate coordinator rollout workers use
(serve/plan_budget.py): one named coordinator per service, found again by a restarted runner,
removed when the service stops. Real Ray; the calls are the gate's own (no LLM needed)."""

from __future__ import annotations

import asyncio
import time

import pytest
import ray

from rollout.llm.budget import BudgetLimits, install_gate, llm_gate
from serve.config import ConfigError, ServeConfig
from serve.plan_budget import budget_name, coordinator_for, install_plan_budget, stop_plan_budget

APP, NAMESPACE = "budget-test", "halo-budget-test"


@pytest.fixture(scope="module")
def ray_cluster():
    if ray.is_initialized():  # another module's Ray (the suite's service) will do
        yield
        return
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, namespace=NAMESPACE)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture()
def local_ray(ray_cluster: None):
    before = llm_gate()
    try:
        yield
    finally:
        install_gate(before)
        stop_plan_budget(APP, NAMESPACE)


async def _calls(n: int, seconds_each: float) -> float:
    async def one() -> None:
        async with llm_gate().call(100):
            await asyncio.sleep(seconds_each)

    t0 = time.monotonic()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.monotonic() - t0


def test_plan_jobs_llm_calls_lease_from_the_services_coordinator(local_ray: None) -> None:
    limits = BudgetLimits(rpm=60, concurrency=2)  # one call a second, a burst of one
    gate = install_plan_budget(limits, APP, NAMESPACE)
    assert gate.limited and llm_gate() is gate
    elapsed = asyncio.run(_calls(4, 0.05))
    assert elapsed >= 2.5, f"4 calls at 60/min took {elapsed:.2f} s: the rate was not enforced"
    # A restarted runner finds the same coordinator (the same buckets), not a fresh one, and gets
    # back the concurrency slots the last runner held (that runner's event loop is gone).
    restarted = install_plan_budget(limits, APP, NAMESPACE)
    assert restarted is not gate and llm_gate() is restarted
    asyncio.run(_calls(1, 0.0))
    stats = ray.get(coordinator_for(limits, APP, NAMESPACE).stats.remote(), timeout=30)
    assert stats["granted_requests"] >= 5 and gate.stats.requests == 4 and restarted.stats.requests == 1
    stop_plan_budget(APP, NAMESPACE)
    with pytest.raises(ValueError):
        ray.get_actor(budget_name(APP), namespace=NAMESPACE)


def test_without_limits_the_gate_only_counts(local_ray: None) -> None:
    gate = install_plan_budget(BudgetLimits(), APP, NAMESPACE)
    assert not gate.limited and gate is llm_gate()
    with pytest.raises(ValueError):
        ray.get_actor(budget_name(APP), namespace=NAMESPACE)


@pytest.mark.parametrize("field_name, value", [("plan_llm_rpm", 0), ("plan_llm_tpm", -5.0),
                                               ("plan_llm_concurrency", "many")])
def test_bad_plan_llm_limits_are_one_line_config_errors(field_name: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field_name):
        ServeConfig(model="m", **{field_name: value}).validate()

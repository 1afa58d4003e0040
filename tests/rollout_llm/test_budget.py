"""The job-wide LLM budget (rollout/llm/budget.py) and `--llm sim:...` parameters, without Ray:
an in-process coordinator, the real OpenAIChatClient, the asyncio OpenAI-protocol server."""

from __future__ import annotations

import asyncio
import time

import pytest

from rollout.llm import LLMConfig, OpenAIChatClient
from rollout.llm.budget import BudgetCoordinator, BudgetError, BudgetLimits, LLMGate, install_gate, llm_gate
from rollout.sim.spec import SimSpecError, parse_sim_spec
from tests.fake_openai import FakeOpenAI


@pytest.fixture
def gate_slot():
    before = llm_gate()
    yield
    install_gate(before)


def test_sim_spec_parameters_and_errors():
    default = parse_sim_spec("sim")
    assert default.config.latency_scale == pytest.approx(0.001) and not default.realtime
    opts = parse_sim_spec("sim:realtime=1,latency_ms=800,latency_sigma=0.2")
    assert opts.realtime and opts.config.latency_median_ms == 800 and opts.config.latency_sigma == 0.2
    assert parse_sim_spec("sim:realtime=1,base_url=http://127.0.0.1:1/v1").base_url == "http://127.0.0.1:1/v1"
    for bad, words in [("sim:realtime=2", "realtime must be 0 or 1"), ("sim:latency_ms=fast", "must be a number"),
                       ("sim:latency_ms=-1", ">= 0"), ("sim:speed=1", "unknown parameter 'speed'"),
                       ("sim:realtime", "key=value"), ("sim:base_url=ftp://x", "http(s) URL"),
                       ("sim:base_url=http://x/v1", "needs realtime=1")]:
        with pytest.raises(SimSpecError, match=words.replace("(", r"\(").replace(")", r"\)")):
            parse_sim_spec(bad)


def test_limits_must_be_positive():
    with pytest.raises(BudgetError, match="--llm-rpm must be a positive number"):
        BudgetLimits(rpm=0)
    with pytest.raises(BudgetError, match="--llm-concurrency"):
        BudgetLimits(concurrency=-3)
    assert not BudgetLimits().enabled and BudgetLimits(tpm=1000).enabled


def test_coordinator_rates_slots_and_a_429_slows_everyone():
    c = BudgetCoordinator(BudgetLimits(rpm=600, concurrency=4), burst_s=1.0)
    first = c.lease("a", 50, 50_000, 50)
    assert first.requests == 10 and first.slots == 4  # one second's burst of 10 req/s; 4 slots in all
    assert c.lease("b", 5, 5000, 2).slots == 0  # nothing left for b: b is now waiting for slots
    assert c.lease("a", 1, 100, 0).over == 2  # a holds all 4 while b waits: it hands back 2 as calls end
    c.give_back("a", 2, 0.0)
    assert c.lease("b", 1, 100, 2).slots == 2
    assert c.lease("a", 1, 100, 0).over == 0  # 2 of 4 is a's share
    c.rate_limited(retry_after_s=0.2)
    assert c.factor == pytest.approx(0.5, abs=0.01)
    assert c.lease("a", 1, 100, 0).paused_s > 0  # Retry-After pauses the whole job
    c.rate_limited(None)  # within cut_interval_s: one cut, not one per 429
    assert c.factor == pytest.approx(0.5, abs=0.01) and c.rate_limited_reports == 2 and c.cuts == 1


def test_token_debt_stops_requests_until_refilled():
    c = BudgetCoordinator(BudgetLimits(tpm=6000), burst_s=1.0)  # 100 tokens/s, bucket of 100
    assert c.lease("a", 1, 80, 0).requests == 1
    # the reply cost far more than estimated: the correction puts the bucket into debt
    assert c.lease("a", 1, 80, 0, token_correction=500).requests == 0
    time.sleep(0.2)
    assert c.lease("a", 1, 80, 0).requests == 0  # still in debt (20 tokens refilled of ~480)


def test_client_calls_respect_job_concurrency_and_rpm(gate_slot):
    """40 calls at once through the real client: the server never sees more than the concurrency
    limit, and the rate stays within the requests/min limit (plus the first second's burst)."""
    limits = BudgetLimits(rpm=1200, concurrency=3)
    coordinator = BudgetCoordinator(limits, burst_s=0.5)
    with FakeOpenAI.simulated(latency_ms=50) as server:
        install_gate(LLMGate(coordinator, limits, worker="w1"))
        client = OpenAIChatClient(LLMConfig(base_url=server.base_url, model="m", max_concurrency=64))

        async def run() -> float:
            t0 = time.monotonic()
            await asyncio.gather(*(client.chat([{"role": "user", "content": "x" * 400}]) for _ in range(40)))
            await client.aclose()
            return time.monotonic() - t0

        elapsed = asyncio.run(run())
        stats = server.stats()
    assert stats["requests"] == 40 and stats["rate_limited"] == 0
    assert stats["max_in_flight"] <= 3
    assert elapsed >= (40 - 10) / 20 * 0.9  # 20 req/s after a burst of 10
    assert llm_gate().stats.requests == 40 and llm_gate().stats.tokens == pytest.approx(40 * (100 + 16), rel=0.05)
    assert coordinator.granted_requests >= 40


def test_429s_from_the_endpoint_slow_the_job_and_calls_still_finish(gate_slot):
    """The job's budget is set above what the server allows: 429s (with Retry-After) cut the
    coordinator's rate, the client retries, and every call ends with an answer."""
    limits = BudgetLimits(rpm=6000)
    coordinator = BudgetCoordinator(limits, burst_s=1.0)
    with FakeOpenAI.simulated(rpm=600, burst_s=0.5, latency_ms=10) as server:
        install_gate(LLMGate(coordinator, limits, worker="w1"))
        client = OpenAIChatClient(LLMConfig(base_url=server.base_url, model="m", max_attempts=30,
                                            backoff_base_s=0.05, max_concurrency=64))

        async def run() -> None:
            await asyncio.gather(*(client.chat([{"role": "user", "content": "hi"}]) for _ in range(20)))
            await client.aclose()

        asyncio.run(run())
        stats = server.stats()
    assert stats["requests"] == 20 and stats["rate_limited"] > 0
    assert llm_gate().stats.rate_limited == stats["rate_limited"]
    assert coordinator.cuts >= 1 and coordinator.factor < 1.0


def test_a_gone_coordinator_fails_the_waiting_calls_as_infra(gate_slot):
    """The job's coordinator actor dies: a call waiting for budget is not retried forever, unlogged.
    Each failed lease is counted; past the timeout the waiting call raises BudgetUnavailable, an
    infra error (its episode is never an outcome)."""
    import ray

    from rollout.core.infra import infra_reason, short_reason
    from rollout.llm.budget import BudgetUnavailable

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        actor = ray.remote(num_cpus=0, max_restarts=0)(BudgetCoordinator).remote(BudgetLimits(rpm=60))
        ray.get(actor.lease.remote("w", 1, 0.0, 0))  # it answers
        ray.kill(actor)
        gate = LLMGate(actor, BudgetLimits(rpm=60), worker="w", coordinator_timeout_s=2.0)

        async def one_call() -> None:
            async with gate.call(10.0):
                pass

        t0 = time.monotonic()
        with pytest.raises(BudgetUnavailable) as caught:
            asyncio.run(asyncio.wait_for(one_call(), timeout=30))
        assert 2.0 <= time.monotonic() - t0 < 20
        assert gate.stats.coordinator_errors >= 2
        assert short_reason(infra_reason(caught.value)) == "llm_budget"
    finally:
        ray.shutdown()

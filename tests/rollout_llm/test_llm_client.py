"""The OpenAI-compatible client against the local fake endpoint: retries, limits, accounting."""

from __future__ import annotations

import asyncio
import time

import pytest

from rollout.llm import (
    LLMBadResponseError,
    LLMConfig,
    LLMConnectionError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    OpenAIChatClient,
    PriceTable,
    config_from_env,
    prompt_sha256,
)
from tests.fake_openai import FakeOpenAI, Reply

MESSAGES = [{"role": "user", "content": "say ok"}]


@pytest.fixture
def server():
    with FakeOpenAI() as srv:
        yield srv


def client_for(server: FakeOpenAI, **kw) -> OpenAIChatClient:
    cfg = dict(base_url=server.base_url, model="fake-model", timeout_s=2.0, backoff_base_s=0.01, max_attempts=3)
    cfg.update(kw)
    return OpenAIChatClient(LLMConfig(**cfg))


def test_normal_reply_with_tokens_and_cost(server):
    prices = PriceTable.from_dict({"models": {"fake-model": {"input": 2.0, "output": 8.0}}})
    client = client_for(server, prices=prices)
    server.script(Reply.text("hello there", prompt_tokens=1000, completion_tokens=500))
    reply = asyncio.run(client.chat(MESSAGES, purpose="test"))
    assert reply.text == "hello there" and reply.attempts == 1
    assert (reply.tokens_in, reply.tokens_out) == (1000, 500)
    assert reply.cost_usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    [rec] = client.records
    assert rec.status == "ok" and rec.purpose == "test" and rec.prompt_sha256 == prompt_sha256(MESSAGES)
    assert rec.tokens_in == 1000 and rec.cost_usd == reply.cost_usd and rec.latency_ms > 0
    assert server.requests[0]["model"] == "fake-model" and server.requests[0]["messages"] == MESSAGES
    assert client.totals()["calls"] == 1 and client.drain_records() and client.records == []


def test_slow_reply_times_out_then_retry_succeeds(server):
    client = client_for(server, timeout_s=0.3)
    server.script(Reply.slow("late", delay_s=1.0), Reply.text("on time"))
    reply = asyncio.run(client.chat(MESSAGES, purpose="t"))
    assert reply.text == "on time" and reply.attempts == 2
    assert len(server.requests) == 2


def test_timeouts_exhaust_attempts_into_typed_error(server):
    client = client_for(server, timeout_s=0.2, max_attempts=2)
    server.script(Reply.slow("late", 0.6), Reply.slow("late", 0.6))
    with pytest.raises(Exception) as info:
        asyncio.run(client.chat(MESSAGES, purpose="t"))
    assert info.value.kind == "timeout" and info.value.attempts == 2
    assert client.records[-1].status == "timeout"


def test_429_honours_retry_after_then_succeeds(server):
    client = client_for(server)
    server.script(Reply.status(429, retry_after=0.5), Reply.text("fine"))
    t0 = time.perf_counter()
    reply = asyncio.run(client.chat(MESSAGES, purpose="t"))
    assert reply.text == "fine" and reply.attempts == 2
    assert time.perf_counter() - t0 >= 0.5  # backoff base is 0.01 s: only Retry-After explains the wait


def test_429_with_too_long_retry_after_fails_fast(server):
    client = client_for(server, max_retry_after_s=1.0)
    server.script(Reply.status(429, retry_after=30))
    with pytest.raises(LLMRateLimitError) as info:
        asyncio.run(client.chat(MESSAGES, purpose="t"))
    assert info.value.status == 429 and len(server.requests) == 1


def test_500_retries_then_typed_error(server):
    client = client_for(server, max_attempts=3)
    server.script(*[Reply.status(500)] * 3)
    with pytest.raises(LLMServerError) as info:
        asyncio.run(client.chat(MESSAGES, purpose="t"))
    assert info.value.attempts == 3 and info.value.status == 500 and len(server.requests) == 3
    assert "server error 500" in str(info.value)


def test_5xx_then_success(server):
    client = client_for(server)
    server.script(Reply.status(503), Reply.text("back"))
    assert asyncio.run(client.chat(MESSAGES, purpose="t")).attempts == 2


def test_malformed_and_wrong_shape_bodies_are_typed_errors_without_retry(server):
    client = client_for(server)
    server.script(Reply.malformed(), Reply.wrong_shape())
    with pytest.raises(LLMBadResponseError, match="not JSON"):
        asyncio.run(client.chat(MESSAGES, purpose="t"))
    with pytest.raises(LLMBadResponseError, match="not a chat completion"):
        asyncio.run(client.chat(MESSAGES, purpose="t"))
    assert len(server.requests) == 2
    assert [r.status for r in client.records] == ["bad_response", "bad_response"]


def test_connection_drop_is_retried(server):
    client = client_for(server)
    server.script(Reply.drop(), Reply.text("again"))
    assert asyncio.run(client.chat(MESSAGES, purpose="t")).text == "again"


def test_unreachable_endpoint_is_connection_error():
    srv = FakeOpenAI()
    url = srv.base_url
    srv.stop()  # never started; the port is closed again
    client = OpenAIChatClient(LLMConfig(base_url=url, model="m", timeout_s=1, backoff_base_s=0.01, max_attempts=2))
    with pytest.raises(LLMConnectionError) as info:
        asyncio.run(client.chat(MESSAGES, purpose="t"))
    assert info.value.attempts == 2


def test_4xx_is_not_retried(server):
    client = client_for(server)
    server.script(Reply.status(400))
    with pytest.raises(LLMRequestError):
        asyncio.run(client.chat(MESSAGES, purpose="t"))
    assert len(server.requests) == 1


def test_concurrency_cap_limits_requests_in_flight(server):
    client = client_for(server, max_concurrency=3)
    server.default = lambda body: Reply.slow("ok", 0.15)

    async def many():
        return await asyncio.gather(*(client.chat(MESSAGES, purpose=f"c{i}") for i in range(10)))

    replies = asyncio.run(many())
    assert len(replies) == 10 and server.max_in_flight == 3
    assert client.totals()["calls"] == 10


def test_client_survives_a_new_event_loop_per_call(server):
    client = client_for(server)
    for _ in range(3):
        assert asyncio.run(client.chat(MESSAGES, purpose="t")).text == "ok"


def test_price_table_yaml_and_errors(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("default: {input: 1.0, output: 1.0}\nmodels:\n  gpt-x: {input: 0.5, output: 4}\n")
    table = PriceTable.from_yaml(path)
    assert table.cost("gpt-x-2025-01-01", 1_000_000, 0) == pytest.approx(0.5)
    assert table.cost("other", 1_000_000, 1_000_000) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="models.bad"):
        PriceTable.from_dict({"models": {"bad": {"input": "lots"}}})


def test_config_from_env(monkeypatch):
    monkeypatch.delenv("HALO_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="HALO_LLM_BASE_URL"):
        config_from_env(model="m")
    monkeypatch.setenv("HALO_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("HALO_LLM_MODEL", "m1")
    cfg = config_from_env()
    assert cfg.base_url.endswith("/v1") and cfg.model == "m1"

"""serve.client against the real service (every route, sync and async, errors with their fields),
and its retry rules against a local HTTP server that answers 503/429 with Retry-After, then 200."""

from __future__ import annotations

import asyncio

import pytest
from scripted_http import ScriptedHTTP as _Flaky
from serve_synthetic import MAP_V1, rule_state, symptom_state

from serve.client import AsyncDecisionClient, DecisionClient, DecisionServiceError, RetryPolicy


def test_sync_client_on_every_route(cluster):
    from serve_keys import ADMIN_KEY, API_KEY

    with DecisionClient(cluster.direct_url, api_key=API_KEY) as client:
        a = client.decide(symptom_state(1).to_dict())
        assert (a.agent_id, a.decided_by, a.policy_version) == (MAP_V1[1], "model", "v1")
        answers = client.decide_batch([symptom_state(0).to_dict(), rule_state("empty").to_dict()])
        assert [(x.agent_id, x.decided_by) for x in answers] == [(MAP_V1[0], "model"), (2, "rule")]
        with pytest.raises(DecisionServiceError) as err:
            client.decide({"task_description": "t", "plan_vaild": True})
        assert (err.value.status, err.value.error, err.value.field) == (422, "invalid_request", "plan_vaild")
        with pytest.raises(DecisionServiceError) as err:
            client.rollback()
        assert err.value.status == 403
    with DecisionClient(cluster.direct_url, api_key=ADMIN_KEY.split("=", 1)[1]) as admin:
        assert admin.model()["target"]["version"] == "v1"
        with pytest.raises(DecisionServiceError) as err:
            admin.deploy(str(cluster.models.bad))
        assert (err.value.status, err.value.error) == (422, "manifest_invalid")


def test_async_client(cluster):
    from serve_keys import API_KEY

    client = AsyncDecisionClient(cluster.direct_url, api_key=API_KEY)

    async def run() -> list[int]:
        answers = await asyncio.gather(*(client.decide(symptom_state(i % 4, task=i).to_dict()) for i in range(8)))
        await client.aclose()
        return [a.agent_id for a in answers]

    assert asyncio.run(run()) == [MAP_V1[i % 4] for i in range(8)]


OK = {"agent_id": 13, "agent_name": "x", "decided_by": "model", "policy_version": "v9", "latency_ms": 0.1}


def test_retries_transient_answers_only(flaky):
    _, url = flaky
    _Flaky.script[:] = [(503, {"retry-after": "0"}, {"error": "unavailable"}),
                        (429, {"retry-after": "0"}, {"error": "rate_limited"}), (200, {}, OK)]
    with DecisionClient(url, retry=RetryPolicy(retries=3, initial_backoff_s=0.01)) as client:
        assert client.decide({"task_description": "t"}).policy_version == "v9"
        assert len(_Flaky.seen) == 3
        for status in (401, 403, 409, 413, 422):
            _Flaky.seen.clear()
            _Flaky.script[:] = [(status, {}, {"error": "no", "field": "f", "detail": "d"}), (200, {}, OK)]
            with pytest.raises(DecisionServiceError) as err:
                client.decide({"task_description": "t"})
            assert (err.value.status, err.value.field, len(_Flaky.seen)) == (status, "f", 1)
        _Flaky.script[:] = []
        _Flaky.seen.clear()
        with pytest.raises(DecisionServiceError) as err:  # 500 every time: retried, then raised
            client.decide({"task_description": "t"})
        assert err.value.status == 500 and len(_Flaky.seen) == 4


def test_the_client_example_in_docs_serve_md_runs(cluster, monkeypatch):
    """The Python example under "Clients" in docs/serve.md, as written (only the URL points at this
    session's service)."""
    import re
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    from serve_keys import API_KEY

    doc = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text()
    block = re.search(r"```python\n(.*?)```", doc, re.S)
    assert block, "docs/serve.md has no python example"
    code = textwrap.dedent(block.group(1)).replace("http://127.0.0.1:8000", cluster.url)
    env = {**__import__("os").environ, "HALO_SERVE_API_KEY": API_KEY}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:3] == ["2", out.stdout.split()[1], "rule"], out.stdout

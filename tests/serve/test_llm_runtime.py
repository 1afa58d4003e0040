"""The LLM policy class served on CPU (transformers + LoRA), hot-swapped into a running service, and
the vLLM runtime's CPU-testable parts: same prompt tokens as the CPU runtime, one greedy token
restricted to the label tokens (emulated here on the CPU model's logits), engine settings."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from llm_artifact import make_llm_artifact
from serve_synthetic import SYMPTOMS, rule_state, symptom_state

from rollout.policies.rules import RulesFirst
from train.policies import load_policy


@pytest.fixture(scope="module")
def llm_dir(tmp_path_factory):
    from train.base_models import make_tiny_model, smollm2_dir

    root = tmp_path_factory.mktemp("llm")
    tiny = make_tiny_model(root / "tiny-base", smollm2_dir(), layers=2, hidden=64, seed=3)
    return make_llm_artifact(root / "artifact", tiny, version="llm-1")


def _states():
    return [symptom_state(i, task=t, step=t) for t in range(3) for i in range(len(SYMPTOMS))] + [rule_state("valid")]


def test_llm_policy_served_on_cpu_matches_in_process(cluster, llm_dir):
    url = cluster.tight_url
    r = httpx.post(f"{url}/v1/admin/model", json={"model": str(llm_dir)}, timeout=120)
    assert r.status_code == 200, r.text
    ready = httpx.get(f"{url}/readyz", timeout=30).json()
    assert (ready["version"], ready["policy_class"], ready["runtime"]) == ("llm-1", "llm", "cpu")
    local = RulesFirst(load_policy(llm_dir))
    states = _states()
    for state in states:
        body = httpx.post(f"{url}/v1/decide", json=state.to_dict(), timeout=60).json()
        want = local.decide(state)
        assert body["agent_id"] == want.agent_id
        assert body["policy_version"] == "llm-1"
        assert body["decided_by"] == ("rule" if want.decided_by == "rule" else "model")
    batch = httpx.post(f"{url}/v1/decide/batch", json={"states": [s.to_dict() for s in states]}, timeout=60).json()
    assert [d["agent_id"] for d in batch["decisions"]] == [local.decide(s).agent_id for s in states]
    # The fast ingress batches the model's decisions on its own loop: both paths at once agree.
    direct = cluster.tight.direct_url

    async def both() -> list[tuple[int, int]]:
        async with httpx.AsyncClient(timeout=60) as client:
            async def pair(state):
                a, b = await asyncio.gather(client.post(f"{url}/v1/decide", json=state.to_dict()),
                                            client.post(f"{direct}/v1/decide", json=state.to_dict()))
                return a.json()["agent_id"], b.json()["agent_id"]
            return [await pair(s) for s in states]  # one request on each path at a time: "tight" sheds more

    assert direct and direct != url
    assert asyncio.run(both()) == [(local.decide(s).agent_id,) * 2 for s in states]
    r = httpx.post(f"{url}/v1/admin/rollback", timeout=60)
    assert r.status_code == 200 and r.json()["target"]["version"] == "v1"
    assert httpx.get(f"{url}/readyz", timeout=30).json()["version"] == "v1"


def test_vllm_request_builder_matches_the_cpu_runtime(llm_dir):
    import torch

    from serve.vllm_runtime import VLLMRequestBuilder
    from train.manifest import Manifest

    manifest = Manifest.load(llm_dir)
    policy = load_policy(llm_dir)
    runtime = policy.runtime
    builder = VLLMRequestBuilder(llm_dir, manifest)
    states = _states()[:-1]
    ids = builder.prompt_token_ids(states)
    enc = runtime.tokenizer(runtime.prompts(states), add_special_tokens=False, padding=True, return_tensors="pt")
    for row, mask, want in zip(enc["input_ids"], enc["attention_mask"], ids, strict=True):
        assert row[mask.bool()].tolist() == want  # same tokens, minus the CPU batch's left padding
    kwargs = builder.sampling_kwargs()
    assert kwargs["max_tokens"] == 1 and kwargs["temperature"] == 0.0
    assert kwargs["allowed_token_ids"] == list(runtime.labels.token_ids)
    # vLLM's restriction emulated on the CPU model: full-vocabulary logits, everything but the label
    # tokens masked, greedy pick -> the same agent as the CPU runtime's argmax over label logits
    with torch.inference_mode():
        for state, prompt_ids in zip(states, ids, strict=True):
            logits = runtime.model(input_ids=torch.tensor([prompt_ids])).logits[0, -1]
            masked = torch.full_like(logits, float("-inf"))
            allowed = torch.tensor(kwargs["allowed_token_ids"])
            masked[allowed] = logits[allowed]
            assert builder.agent_for(int(masked.argmax())) == policy.decide(state).agent_id
    with pytest.raises(RuntimeError, match="not one of the 21 label tokens"):
        builder.agent_for(max(kwargs["allowed_token_ids"]) + 1)
    engine = builder.engine_kwargs({"gpu_memory_utilization": 0.5})
    assert engine["enable_lora"] and engine["max_lora_rank"] >= 8 and engine["enable_prefix_caching"]
    assert engine["tokenizer"] == str(llm_dir) and engine["gpu_memory_utilization"] == 0.5
    assert engine["model"] == manifest.extra["base_model_path"]


def test_vllm_runtime_is_optional(llm_dir):
    import importlib.util

    from serve.runtime import ModelLoadError, choose_runtime, load_model
    from train.manifest import Manifest

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here; this checks the CPU-only install")
    manifest = Manifest.load(llm_dir)
    assert choose_runtime(manifest, "auto") == "cpu"
    assert choose_runtime(manifest, "vllm") == "vllm"
    with pytest.raises(ModelLoadError, match="vllm is not installed"):
        load_model(str(llm_dir), runtime="vllm")
    assert "vllm" not in __import__("sys").modules

"""GPU runtime: the LLM policy on vLLM (optional extra `halo-cluster[gpu]`; vllm is imported only here,
and only when this runtime is chosen).

Same answers as the CPU runtime (train/llm_policy.py) on the same inputs: the same encoder and
tokenizer produce the same prompt token IDs, and the one generated token is restricted to the
label tokens, one per agent (`allowed_token_ids`), with greedy sampling, i.e. the argmax over the
label logits.
The LoRA adapter is applied per request (LoRARequest); prefix caching reuses the KV cache of the
shared prompt head (system prompt and template) across decisions.

`VLLMRequestBuilder` holds everything that does not need vllm or a GPU, so it is tested on CPU.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollout.core.agent_table import NUM_AGENTS
from rollout.core.decision import MODEL, Decision, Policy
from rollout.core.state import EpisodeState
from train.manifest import Manifest, ManifestError

ADAPTER_DIR = "adapter"
DEFAULT_ENGINE_OPTIONS: dict[str, Any] = {
    "enable_prefix_caching": True,
    "gpu_memory_utilization": 0.85,
    "max_model_len": 4096,
    "dtype": "bfloat16",
}


class VLLMRequestBuilder:
    """Prompt token IDs, sampling settings and output decoding for one model artifact."""

    def __init__(self, model_dir: str | Path, manifest: Manifest, tokenizer: Any | None = None,
                 max_prompt_tokens: int = 2048) -> None:
        from train.base_models import load_tokenizer
        from train.labels import LabelError, label_set_from_map

        self.model_dir = Path(model_dir)
        self.manifest = manifest
        if manifest.policy_class != "llm":
            raise ManifestError(f"{model_dir}: vLLM serves LLM policies, not {manifest.policy_class!r}")
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(self.model_dir)
        try:
            self.labels = label_set_from_map(self.tokenizer, manifest.label_map)
        except LabelError as exc:
            raise ManifestError(f"{model_dir}: manifest label map does not fit the tokenizer: {exc}") from exc
        self.max_prompt_tokens = max_prompt_tokens
        self._agent_for_token = self.labels.agent_for_token()

    @property
    def label_token_ids(self) -> list[int]:
        return list(self.labels.token_ids)

    def prompt_token_ids(self, states: Sequence[EpisodeState]) -> list[list[int]]:
        """Exactly the tokens the CPU runtime feeds the model (no padding; vLLM needs none)."""
        from train.encoder import encode_state

        out = []
        for state in states:
            text = encode_state(state, self.tokenizer, self.manifest.encoder_version, self.manifest.label_map)
            ids = self.tokenizer(text, add_special_tokens=False, truncation=True,
                                 max_length=self.max_prompt_tokens)["input_ids"]
            out.append(list(ids))
        return out

    def sampling_kwargs(self) -> dict[str, Any]:
        """One greedy token out of the label tokens; its logprobs over the labels for the record."""
        return {"n": 1, "max_tokens": 1, "temperature": 0.0, "allowed_token_ids": self.label_token_ids,
                "logprobs": len(self.label_token_ids), "detokenize": False}

    def agent_for(self, token_id: int) -> int:
        agent = self._agent_for_token.get(int(token_id))
        if agent is None:
            raise RuntimeError(f"vLLM produced token {token_id}, which is not one of the {NUM_AGENTS} label tokens")
        return agent

    def adapter_path(self) -> Path | None:
        adapter = self.model_dir / ADAPTER_DIR
        return adapter if (adapter / "adapter_config.json").is_file() else None

    def lora_rank(self) -> int:
        adapter = self.adapter_path()
        if adapter is None:
            return 0
        return int(json.loads((adapter / "adapter_config.json").read_text()).get("r", 16))

    def base_model_path(self) -> str:
        from train.base_models import resolve_base_model

        return str(resolve_base_model(self.manifest.extra.get("base_model_path") or self.manifest.base_model))

    def engine_kwargs(self, options: dict[str, Any] | None = None) -> dict[str, Any]:
        kwargs = {**DEFAULT_ENGINE_OPTIONS, **(options or {})}
        kwargs["model"] = self.base_model_path()
        kwargs["tokenizer"] = str(self.model_dir)
        rank = self.lora_rank()
        if rank:
            if self.labels.added_tokens:
                raise ManifestError(f"{self.model_dir}: the label set adds special tokens; vLLM LoRA cannot grow "
                                    "the vocabulary — serve a merged checkpoint instead")
            kwargs.setdefault("enable_lora", True)
            kwargs.setdefault("max_lora_rank", max(8, rank))
            kwargs.setdefault("max_loras", 1)
        return kwargs


class VLLMPolicy(Policy):
    name = "llm-vllm"

    def __init__(self, model_dir: str | Path, manifest: Manifest, **engine_options: Any) -> None:
        from vllm import LLM  # the optional GPU extra

        self.builder = VLLMRequestBuilder(model_dir, manifest)
        self.version = manifest.version
        self.llm = LLM(**self.builder.engine_kwargs(engine_options))
        self._lora = None
        adapter = self.builder.adapter_path()
        if adapter is not None:
            from vllm.lora.request import LoRARequest

            self._lora = LoRARequest(f"halo-{manifest.name}-{manifest.version}", 1, str(adapter))

    def decide_batch(self, states: Sequence[EpisodeState]) -> list[Decision]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if not states:
            return []
        t0 = time.perf_counter()
        prompts = [TokensPrompt(prompt_token_ids=ids) for ids in self.builder.prompt_token_ids(states)]
        params = SamplingParams(**self.builder.sampling_kwargs())
        outputs = self.llm.generate(prompts, params, lora_request=self._lora, use_tqdm=False)
        per = (time.perf_counter() - t0) * 1000.0 / len(states)
        return [Decision(self.builder.agent_for(o.outputs[0].token_ids[0]), MODEL, per, "llm-vllm", self.version)
                for o in outputs]

    def _decide(self, state: EpisodeState) -> Decision:
        return self.decide_batch([state])[0]

"""The LLM policy at inference: one forward pass per decision, argmax over the 21 label tokens.

`LLMRuntime` loads base model + LoRA adapter (merged for speed), the tokenizer saved with the
artifact, and re-verifies the manifest's label map against that tokenizer. `decide_batch`
encodes states (train/encoder.py), left-pads them, runs ONE batched forward pass computing
logits only at the last position, and picks the best label token per row. Nothing is generated.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from train.base_models import load_tokenizer, resolve_base_model
from train.encoder import encode_state
from train.labels import LabelError, label_set_from_map
from train.manifest import Manifest, ManifestError

POLICY_CLASS = "llm"
ADAPTER_DIR = "adapter"


class LLMRuntime:
    def __init__(self, model_dir: str | Path, *, manifest: Manifest | None = None, device: str | None = None,
                 max_length: int | None = None, merge: bool = True) -> None:
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        self.model_dir = Path(model_dir)
        self.manifest = manifest or Manifest.load(self.model_dir)
        if self.manifest.policy_class != POLICY_CLASS:
            raise ManifestError(f"{model_dir}: policy_class {self.manifest.policy_class!r}, want {POLICY_CLASS!r}")
        adapter = self.model_dir / ADAPTER_DIR
        if not (adapter / "adapter_config.json").is_file():
            raise ManifestError(f"{adapter}: no LoRA adapter (adapter_config.json missing)")
        self.tokenizer = load_tokenizer(self.model_dir)
        # Left padding puts every prompt's last token at -1; left truncation (as in training)
        # keeps `Selected Agent:` and the latest state when a prompt is too long.
        self.tokenizer.padding_side = "left"
        self.tokenizer.truncation_side = "left"
        try:
            self.labels = label_set_from_map(self.tokenizer, self.manifest.label_map)
        except LabelError as exc:
            raise ManifestError(f"{model_dir}: manifest label map does not fit the tokenizer: {exc}") from exc
        base_path = resolve_base_model(self.manifest.extra.get("base_model_path") or self.manifest.base_model)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        base = AutoModelForCausalLM.from_pretrained(str(base_path), dtype=dtype)
        if len(self.tokenizer) > base.get_input_embeddings().weight.shape[0]:
            base.resize_token_embeddings(len(self.tokenizer))
        model = PeftModel.from_pretrained(base, str(adapter))
        self.model = (model.merge_and_unload() if merge else model).to(self.device).eval()
        self.max_length = int(max_length or self.manifest.extra.get("max_length", 2048))
        self._label_ids = torch.tensor(self.labels.token_ids, device=self.device)
        self.version = self.manifest.version

    def prompts(self, states: Sequence[EpisodeState]) -> list[str]:
        return [encode_state(s, self.tokenizer, self.manifest.encoder_version, self.manifest.label_map)
                for s in states]

    def encode(self, states: Sequence[EpisodeState]) -> Any:
        return self.tokenizer(self.prompts(states), add_special_tokens=False, padding=True, truncation=True,
                              max_length=self.max_length, return_tensors="pt").to(self.device)

    def label_logits(self, states: Sequence[EpisodeState]) -> Any:
        """[batch, 21] logits of the label tokens at the position after `Selected Agent:`."""
        import torch

        enc = self.encode(states)
        positions = (enc["attention_mask"].cumsum(-1) - 1).clamp(min=0)  # as in training
        with torch.inference_mode():
            out = self.model(**enc, position_ids=positions, logits_to_keep=1)
        return out.logits[:, -1, :].index_select(-1, self._label_ids).float()

    def decide_batch(self, states: Sequence[EpisodeState]) -> list[Decision]:
        if not states:
            return []
        t0 = time.perf_counter()
        choice = self.label_logits(states).argmax(dim=-1).tolist()
        per = (time.perf_counter() - t0) * 1000.0 / len(states)
        return [Decision(int(a), "model", per, "llm", self.version) for a in choice]


class LLMPolicy(Policy):
    def __init__(self, runtime: LLMRuntime) -> None:
        self.runtime = runtime
        self.name = runtime.manifest.name
        self.version = runtime.manifest.version

    def _decide(self, state: EpisodeState) -> Decision:
        return self.runtime.decide_batch([state])[0]

    def decide_batch(self, states: Sequence[EpisodeState]) -> list[Decision]:
        return self.runtime.decide_batch(states)

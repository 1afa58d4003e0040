"""A real LLM policy artifact for serving tests: a small Llama-family model, a LoRA adapter on all
projection layers (untrained: serving must reproduce the in-process answers, not good ones), the
tokenizer and a manifest whose label map is verified against that tokenizer."""

from __future__ import annotations

import time
from pathlib import Path


def make_llm_artifact(out: Path, base_dir: Path, *, version: str = "llm-1", seed: int = 0) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from train.base_models import load_tokenizer
    from train.encoder import ENCODER_VERSION
    from train.labels import choose_label_set
    from train.llm_policy import ADAPTER_DIR
    from train.manifest import Manifest
    from train.sft import LORA_TARGETS

    out.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(base_dir)
    labels = choose_label_set(tok, allow_added_tokens=False)
    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=list(LORA_TARGETS),
                        init_lora_weights=False)  # random B: the adapter really changes the answers
    get_peft_model(base, config).save_pretrained(str(out / ADAPTER_DIR))
    tok.save_pretrained(str(out))
    manifest = Manifest(name="serve-llm", version=version, policy_class="llm", label_map=labels.label_map,
                        encoder_version=ENCODER_VERSION, base_model=str(base_dir), created_at=time.time(),
                        extra={"base_model_path": str(base_dir), "label_kind": labels.kind})
    manifest.save(out)
    return out

"""The pieces of supervised fine-tuning that run inside a training worker (torch only here).

The input is the prompt alone, left-padded, so the label is predicted at the last position of
every row. The label-only path asks the model for logits at that one position
(`logits_to_keep=1`: the last hidden state through the LM head), instead of materialising
[batch, length, vocab] logits for the whole sequence (1.6 GB at batch 4 x 2048 x 49k in fp32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class Batch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    labels: torch.Tensor  # label token ID per row
    agents: torch.Tensor  # agent ID per row


def tokenize_prompts(tokenizer: Any, prompts: list[str], max_length: int) -> list[list[int]]:
    out: list[list[int]] = []
    if not prompts:
        return out
    for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]:
        # Over-long prompts lose their beginning: the end holds `Selected Agent:` and the latest state.
        out.append(ids[-max_length:])
    return out


def collate(rows: list[tuple[list[int], int, int]], pad_id: int) -> Batch:
    width = max(len(r[0]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (toks, _, _) in enumerate(rows):
        ids[i, width - len(toks):] = torch.tensor(toks, dtype=torch.long)
        mask[i, width - len(toks):] = 1
    # Positions count real tokens only, so a row gets the same encoding whatever its padding.
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return Batch(ids, mask, pos, torch.tensor([r[1] for r in rows]), torch.tensor([r[2] for r in rows]))


def last_position_logits(model: Any, batch: Batch, *, label_only: bool = True) -> torch.Tensor:
    """[batch, vocab] logits at the last (label-predicting) position."""
    if label_only:
        out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                    position_ids=batch.position_ids, logits_to_keep=1, use_cache=False)
        return out.logits[:, -1, :]
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                position_ids=batch.position_ids, use_cache=False)
    return out.logits[:, -1, :]


def label_loss(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    return F.cross_entropy(logits.float(), batch.labels)


def full_sequence_loss(model: Any, batch: Batch) -> torch.Tensor:
    """The usual SFT baseline: append the label token, mask every other position with -100 and
    let the model compute logits (and the shifted loss) over the whole sequence."""
    ids = torch.cat([batch.input_ids, batch.labels[:, None]], dim=1)
    mask = torch.cat([batch.attention_mask, torch.ones_like(batch.labels[:, None])], dim=1)
    pos = torch.cat([batch.position_ids, batch.position_ids[:, -1:] + 1], dim=1)
    targets = torch.full_like(ids, -100)
    targets[:, -1] = batch.labels
    return model(input_ids=ids, attention_mask=mask, position_ids=pos, labels=targets, use_cache=False).loss


def label_predictions(logits: torch.Tensor, label_token_ids: torch.Tensor) -> torch.Tensor:
    """Agent ID per row: argmax over the 21 label tokens only."""
    return logits.index_select(-1, label_token_ids).argmax(-1)


def build_model(base_path: str, *, label_token_ids: list[int], vocab_size: int, qlora: bool, lora_r: int,
                lora_alpha: int, lora_dropout: float, lm_head: str, device: str = "cpu",
                gradient_checkpointing: bool = True) -> Any:
    """Base model (optionally 4-bit NF4) with LoRA adapters on attention and MLP projections.

    lm_head="labels" trains the LM-head rows of the 21 label tokens (PEFT trainable tokens; the
    only rows a label-only objective reads at inference); "full" trains the whole head;
    "none" freezes it.
    """
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if qlora:
        from transformers import BitsAndBytesConfig

        compute = torch.bfloat16 if device.startswith("cuda") else torch.float32
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute,
            bnb_4bit_use_double_quant=True)
        if device.startswith("cuda"):
            kwargs["device_map"] = {"": device}
    model = AutoModelForCausalLM.from_pretrained(base_path, **kwargs)
    if vocab_size > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(vocab_size)
    if qlora:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    if gradient_checkpointing:
        # Recompute each layer's activations in backward: at 2048 tokens they, not the weights,
        # are what fills memory. Non-reentrant checkpointing needs no input-grad hooks.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    extra: dict[str, Any] = {}
    if lm_head == "labels":
        tied = bool(getattr(model.config, "tie_word_embeddings", False))
        extra["trainable_token_indices"] = {("embed_tokens" if tied else "lm_head"): list(label_token_ids)}
    elif lm_head == "full":
        extra["modules_to_save"] = ["lm_head"]
    elif lm_head != "none":
        raise ValueError(f"lm_head must be labels | full | none, got {lm_head!r}")
    config = LoraConfig(r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout, target_modules=list(LORA_TARGETS),
                        task_type="CAUSAL_LM", **extra)
    model = get_peft_model(model, config)
    if not qlora:
        model.to(device)
    return model

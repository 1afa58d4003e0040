"""Ray Train LoRA on a tiny Llama-family model with SmolLM2's tokenizer (real Ray, real PEFT)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from synthetic import synthetic_episodes

from rollout.core.state import EpisodeState
from tests.train.faults import CrashOnce
from train.base_models import BaseModelError
from train.dataset import BuildConfig, DatasetError, build_dataset
from train.llm_policy import LLMPolicy
from train.manifest import Manifest, ManifestError
from train.policies import load_policy
from train.trainer import CheckpointError, LabelMismatchError, TrainConfig, latest_checkpoint, train_llm


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, smollm2_path):
    out = tmp_path_factory.mktemp("ds") / "data"
    build_dataset(synthetic_episodes(n_tasks=12, seed=11), out,
                  BuildConfig(augment_copies=0, tokenizer_dir=str(smollm2_path)))
    return out


def _cfg(dataset, tiny_model, out, **kw) -> TrainConfig:
    base = dict(data_dir=str(dataset), base_model=str(tiny_model), out=str(out), max_steps=2, warmup_steps=1,
                lr=1e-3, batch_size=2, grad_accum=2, max_length=256, lora_dropout=0.0, max_train_examples=24,
                max_val_examples=8, checkpoint_every=1)
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def trained(ray_local, dataset, tiny_model, tmp_path_factory):
    """Two DDP workers; rank 0 crashes once after step 1 and Ray restarts the group, which
    resumes from the step-1 checkpoint."""
    out = tmp_path_factory.mktemp("models") / "tiny"
    first = train_llm(_cfg(dataset, tiny_model, out, workers=2, batch_size=1, threads_per_worker=1,
                           on_step=CrashOnce(out / ".crash-injected", at_step=1)))
    return out, first


def test_train_crash_resume_and_decide(trained, dataset, tiny_model):
    out, manifest = trained
    assert (out / ".crash-injected").is_file(), "the injected crash really happened"
    assert manifest.extra["workers"] == 2
    assert manifest.policy_class == "llm" and manifest.label_map[20] == " U"
    assert manifest.metrics["global_step"] == 2 and 0 <= manifest.metrics["val_accuracy"] <= 1
    for name in ("manifest.json", "adapter/adapter_config.json", "adapter/adapter_model.safetensors",
                 "tokenizer.json", "curves.png", "history.json", "train_tasks.json"):
        assert (out / name).is_file(), name
    first = json.loads((out / "history.json").read_text())["steps"]
    assert [s["step"] for s in first] == [1, 2]

    assert torch.isfinite(torch.tensor([s["loss"] for s in first])).all()
    # A second run on the same --out resumes from the newest checkpoint instead of starting over
    # (here with one worker on the same global batch of 4).
    manifest2 = train_llm(_cfg(dataset, tiny_model, out, max_steps=4))
    steps = json.loads((out / "history.json").read_text())["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert steps[0]["loss"] == first[0]["loss"] and manifest2.metrics["global_step"] == 4

    policy = load_policy(out)
    assert isinstance(policy, LLMPolicy)
    calls = []
    policy.runtime.model.register_forward_hook(lambda *a: calls.append(1))
    states = [EpisodeState(task_description=f"task {i}", domain="(define (domain d))",
                           validator_errors="[validate.goal_not_reached]", error_category="plan_invalid")
              for i in range(3)]
    decisions = policy.decide_batch(states)
    assert len(calls) == 1, "one forward pass for the whole batch"
    # Over-long prompts lose their beginning, never the `Selected Agent:` end.
    policy.runtime.max_length = 40
    enc = policy.runtime.encode(states)
    assert enc["input_ids"].shape[1] == 40
    assert policy.runtime.tokenizer.decode(enc["input_ids"][0, -4:]).endswith("Selected Agent:")
    assert all(0 <= d.agent_id <= 20 and d.decided_by == "model" for d in decisions)


def test_corrupted_checkpoint_stops_clearly(trained, dataset, tiny_model, tmp_path):
    out = tmp_path / "m"
    shutil.copytree(trained[0], out)
    ckpt = latest_checkpoint(out)
    state = ckpt / "state.pt"
    state.write_bytes(state.read_bytes()[: len(state.read_bytes()) // 2])
    with pytest.raises(CheckpointError, match="corrupted"):
        train_llm(_cfg(dataset, tiny_model, out, max_steps=8))


def test_bad_inputs_stop_before_training(dataset, tiny_model, tmp_path, smollm2_path):
    with pytest.raises(BaseModelError, match="does not exist"):
        train_llm(_cfg(dataset, tmp_path / "no-such-model", tmp_path / "o1"))
    with pytest.raises(DatasetError, match="does not exist"):
        train_llm(_cfg(tmp_path / "no-such-data", tiny_model, tmp_path / "o2"))
    # A dataset whose training split is empty (every task went to validation).
    empty = tmp_path / "empty"
    build_dataset(synthetic_episodes(n_tasks=1, seed=2), empty, BuildConfig(augment_copies=0, val_fraction=1.0,
                                                                             tokenizer_dir=str(smollm2_path)))
    with pytest.raises(DatasetError, match="training split is empty"):
        train_llm(_cfg(empty, tiny_model, tmp_path / "o3"))
    # A dataset encoded with another label set than the model's tokenizer gives.
    mismatched = tmp_path / "mismatch"
    shutil.copytree(dataset, mismatched)
    card = json.loads((mismatched / "dataset_card.json").read_text())
    card["label_map"] = {str(i): str(i) for i in range(21)}
    (mismatched / "dataset_card.json").write_text(json.dumps(card))
    with pytest.raises(LabelMismatchError, match="label set does not match"):
        train_llm(_cfg(mismatched, tiny_model, tmp_path / "o4"))


def test_manifest_label_map_must_fit_tokenizer(trained, dataset, tiny_model, tmp_path):
    out = tmp_path / "m"
    shutil.copytree(trained[0], out)
    manifest = Manifest.load(out)
    manifest.label_map = {i: f" {i}" for i in range(21)}  # " 10" is not one token for SmolLM2
    manifest.save(out)
    with pytest.raises(ManifestError, match="label map does not fit"):
        load_policy(out)
    # Continuing training from this artifact with a dataset of another label set is refused too.
    with pytest.raises(LabelMismatchError, match="manifest"):
        train_llm(_cfg(dataset, tiny_model, tmp_path / "m2", init_from=str(out)))


def test_qlora_trains_a_4bit_nf4_base_on_cpu(ray_local, dataset, tiny_model, tmp_path):
    """--qlora: the base loads as bitsandbytes 4-bit NF4 (CPU kernels here), LoRA trains on top,
    and the artifact serves like any other LLM policy."""
    import bitsandbytes as bnb

    from train.base_models import load_tokenizer
    from train.labels import choose_label_set
    from train.sft import build_model

    tok = load_tokenizer(str(tiny_model))
    model = build_model(str(tiny_model), label_token_ids=list(choose_label_set(tok).token_ids), vocab_size=len(tok),
                        qlora=True, lora_r=4, lora_alpha=8, lora_dropout=0.0, lm_head="labels",
                        gradient_checkpointing=False)
    quantized = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert quantized and all(m.weight.quant_type == "nf4" for m in quantized)
    assert all(not m.weight.requires_grad for m in quantized)  # the 4-bit base stays frozen
    assert any(p.requires_grad for n, p in model.named_parameters() if "lora_" in n)

    out = tmp_path / "qlora"
    manifest = train_llm(_cfg(dataset, tiny_model, out, qlora=True, grad_accum=1))
    assert manifest.extra["qlora"] is True and manifest.metrics["global_step"] == 2
    steps = json.loads((out / "history.json").read_text())["steps"]
    assert [s["step"] for s in steps] == [1, 2]
    assert all(torch.isfinite(torch.tensor([s["loss"], s["grad_norm"]])).all() and s["grad_norm"] > 0 for s in steps)
    policy = load_policy(out)
    d = policy.decide(EpisodeState(task_description="stack the blocks", domain="(define (domain d))",
                                   validator_errors="[validate.goal_not_reached]", error_category="plan_invalid"))
    assert 0 <= d.agent_id <= 20 and d.decided_by == "model"

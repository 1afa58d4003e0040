"""Warm-started fine-tuning of the fast policy (hashed linear) on Ray Train.

The sibling of `train.fast_policy`'s from-scratch sklearn fit, for the online loop: the serving
model's weights are the starting point; feature buckets the new data brings get zero rows; a Ray
Train `TorchTrainer` (gloo on CPU, DDP across workers) minimises cross-entropy plus an L2 pull
towards the serving weights, so a cycle adapts the model to the new data without forgetting what
it was (a cold start uses zeros). The artifact is the format `train.fast_policy` writes
(weights.npz + manifest.json), so serving and evaluation load it unchanged. torch and Ray Train
are imported only when it runs.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rollout.core.agent_table import NUM_AGENTS
from train.encoder import ENCODER_VERSION
from train.examples import Example
from train.fast_policy import (
    ID_LABELS,
    POLICY_CLASS,
    WEIGHTS_FILE,
    EmptyDatasetError,
    HashedLinearPolicy,
    read_weights,
    write_weights,
)
from train.features import DEFAULT_BUCKETS, FEATURE_VERSION, hash_features, state_features
from train.manifest import Manifest


class FinetuneSettings(Protocol):
    """What a fine-tuning run is given (the online loop's `TrainSettings` is one)."""

    workers: int  # Ray Train workers
    use_gpu: bool
    epochs: int
    lr: float
    l2: float  # pull towards the warm-start weights


# A warm start keeps unseen agents' biases from the serving model but no lower than this, so an
# agent that first appears in new data can still be learned in one cycle.
MIN_INIT_BIAS = -8.0


def _train_loop(config: dict[str, Any]) -> None:
    """Runs on every Ray Train worker: full-batch steps on this worker's shard; DDP averages."""
    import os

    import ray.train
    import torch
    from ray.train.torch import get_device, prepare_model

    torch.manual_seed(config["seed"])
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    rows = [r for i, r in enumerate(config["rows"]) if i % world == rank]
    labels = [y for i, y in enumerate(config["labels"]) if i % world == rank]
    device = get_device()  # cpu, or this worker's GPU with use_gpu
    w0 = torch.tensor(config["w0"], dtype=torch.float32, device=device)
    b0 = torch.tensor(config["b0"], dtype=torch.float32, device=device)

    class HashedLinear(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.EmbeddingBag(w0.shape[0], w0.shape[1], mode="sum")
            self.emb.weight.data.copy_(w0)
            self.bias = torch.nn.Parameter(b0.clone())

        def forward(self, flat: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
            return self.emb(flat, offsets) + self.bias

    model = prepare_model(HashedLinear())
    core = model.module if hasattr(model, "module") else model
    flat = torch.tensor([c for r in rows for c in r], dtype=torch.long, device=device)
    offsets = torch.tensor(np.cumsum([0] + [len(r) for r in rows[:-1]]).tolist(), dtype=torch.long, device=device)
    target = torch.tensor(labels, dtype=torch.long, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    loss = torch.tensor(0.0)
    for _ in range(config["epochs"]):
        optimizer.zero_grad()
        logits = model(flat, offsets)
        loss = torch.nn.functional.cross_entropy(logits, target, reduction="sum") / max(config["n_total"], 1)
        # Pull towards the serving weights (warm start), scaled so the sum over workers is one term.
        anchor = ((core.emb.weight - w0) ** 2).sum() + ((core.bias - b0) ** 2).sum()
        (loss + config["l2"] * anchor / world).backward()
        optimizer.step()
    metrics = {"train_loss": float(loss) * world, "examples": len(rows)}
    if rank == 0:
        with tempfile.TemporaryDirectory() as tmp:
            np.savez(os.path.join(tmp, "weights.npz"), weights=core.emb.weight.detach().cpu().numpy(),
                     bias=core.bias.detach().cpu().numpy())
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp))
    else:
        ray.train.report(metrics)


def finetune_fast(examples: list[Example], out_dir: Path, *, init_dir: Path | None, settings: FinetuneSettings,
                  name: str, version: str, data_versions: list[str], storage_path: str | Path,
                  extra: dict[str, Any] | None = None) -> Manifest:
    """Train a fast-policy artifact in `out_dir` from `examples` (their train/validation split),
    warm-started from the artifact in `init_dir` (None: cold start); Ray Train's results go
    under `storage_path`. Raises EmptyDatasetError without training examples."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    train = [e for e in examples if e.split == "train"]
    val = [e for e in examples if e.split == "validation"]
    if not train:
        raise EmptyDatasetError("no training examples in this cycle's data (only rule-decided steps?)")
    start = _warm_start(init_dir)
    feats = [hash_features(state_features(e.state), start.n_buckets) for e in train]
    buckets = np.array(sorted(set(start.buckets.tolist()) | {b for r in feats for b in r}), dtype=np.int64)
    col = {int(b): i for i, b in enumerate(buckets)}
    w0 = np.zeros((len(buckets), NUM_AGENTS), dtype=np.float32)
    for i, b in enumerate(start.buckets.tolist()):
        w0[col[b]] = start.weights[i]

    t0 = time.perf_counter()
    trainer = TorchTrainer(
        _train_loop,
        train_loop_config={"rows": [[col[b] for b in r] for r in feats], "labels": [e.agent_id for e in train],
                           "w0": w0.tolist(), "b0": start.bias.tolist(), "epochs": settings.epochs,
                           "lr": settings.lr, "l2": settings.l2, "n_total": len(train), "seed": 0},
        # No more workers than examples: every worker needs a non-empty shard.
        scaling_config=ScalingConfig(num_workers=max(1, min(settings.workers, len(train))), use_gpu=settings.use_gpu),
        run_config=RunConfig(name=f"{name}-{version}", storage_path=str(storage_path)),
    )
    result = trainer.fit()
    fit_s = time.perf_counter() - t0
    if result.checkpoint is None:
        raise RuntimeError(f"Ray Train finished without a checkpoint: {result.error}")
    with result.checkpoint.as_directory() as ckpt, np.load(Path(ckpt) / "weights.npz") as data:
        weights, bias = data["weights"], data["bias"]

    out_dir.mkdir(parents=True, exist_ok=True)
    write_weights(out_dir / WEIGHTS_FILE, buckets, weights, bias, start.n_buckets)
    policy = HashedLinearPolicy(buckets, weights, bias, start.n_buckets, name=name, version=version)
    metrics = {"train_examples": float(len(train)), "val_examples": float(len(val)), "fit_s": fit_s,
               "train_loss": float(result.metrics.get("train_loss", float("nan"))),
               "train_accuracy": _accuracy(policy, train), "ray_train_workers": float(settings.workers)}
    if val:
        metrics["val_accuracy"] = _accuracy(policy, val)
    extra = {"feature_version": FEATURE_VERSION, "n_buckets": start.n_buckets, "nonzero_buckets": int(len(buckets)),
             "warm_start_from": str(init_dir) if init_dir else "", **(extra or {})}
    return _save_manifest(out_dir, name, version, data_versions, metrics, extra)


@dataclass
class WarmStart:
    """The serving model's weights to start from (empty for a cold start)."""

    buckets: np.ndarray
    weights: np.ndarray
    bias: np.ndarray
    n_buckets: int


def _warm_start(init_dir: Path | None) -> WarmStart:
    if init_dir is None:
        return WarmStart(np.zeros(0, dtype=np.int64), np.zeros((0, NUM_AGENTS), dtype=np.float32),
                         np.zeros(NUM_AGENTS, dtype=np.float32), DEFAULT_BUCKETS)
    init_manifest = Manifest.load(init_dir)
    if init_manifest.policy_class != POLICY_CLASS:
        raise ValueError(f"cannot warm-start a {POLICY_CLASS} model from a {init_manifest.policy_class} one")
    n_buckets = int(init_manifest.extra.get("n_buckets", DEFAULT_BUCKETS))
    buckets, weights, bias, _ = read_weights(init_dir / WEIGHTS_FILE)  # n_buckets: the manifest's, as before
    return WarmStart(buckets, weights, np.maximum(bias, MIN_INIT_BIAS), n_buckets)


def _save_manifest(out_dir: Path, name: str, version: str, data_versions: list[str], metrics: dict[str, float],
                   extra: dict[str, Any]) -> Manifest:
    manifest = Manifest(name=name, version=version, policy_class=POLICY_CLASS, label_map=dict(ID_LABELS),
                        encoder_version=ENCODER_VERSION, data_versions=list(data_versions), metrics=metrics,
                        created_at=time.time(), extra=extra)
    manifest.verify()
    manifest.save(out_dir)
    return manifest


def _accuracy(policy: Any, examples: list[Example]) -> float:
    return sum(policy.decide(e.state).agent_id == e.agent_id for e in examples) / len(examples)

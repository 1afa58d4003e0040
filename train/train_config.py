"""The settings of one `halo train` LLM run and the checkpoint layout its workers write (shared by
train.trainer, the driver, and train.train_worker, the Ray Train workers)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STATE_FILE = "state.pt"
META_FILE = "meta.json"
CHECKPOINT_DIR = "checkpoints"


@dataclass
class TrainConfig:
    data_dir: str
    base_model: str
    out: str
    name: str = ""
    workers: int = 1
    qlora: bool = False
    epochs: int = 3
    max_steps: int = 0  # 0: run all epochs
    lr: float = 2e-5
    warmup_steps: int = 100
    batch_size: int = 4
    grad_accum: int = 4
    max_length: int = 2048
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lm_head: str = "labels"
    gradient_checkpointing: bool = True
    clip: float = 1.0
    seed: int = 0
    max_train_examples: int = 0  # 0: all (caps are for short CPU runs)
    max_val_examples: int = 0
    checkpoint_every: int = 0  # optimizer steps between extra checkpoints; 0: once per epoch
    resume: bool = True
    init_from: str = ""  # a previous model artifact to continue from (online loop)
    threads_per_worker: int = 0  # 0: cpus / workers
    max_failures: int = 1
    use_gpu: bool = False
    progress: bool = False  # rank 0 prints one line per optimizer step (shown when we start Ray)
    # Called on every worker after each optimizer step (and its checkpoint) with (global step,
    # worker rank); it runs inside the Ray Train workers, so it must pickle. Tests inject faults here.
    on_step: Callable[[int, int], None] | None = None

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.grad_accum * self.workers


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

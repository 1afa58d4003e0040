"""Fine-tuning a candidate of the LLM policy class for the online loop:
`train.trainer.train_llm` with `init_from` = the serving adapter. (The fast policy class is
fine-tuned by `train.fast_finetune.finetune_fast`, which takes the loop's `TrainSettings` as is.)
"""

from __future__ import annotations

from pathlib import Path

from cluster.loop.config import TrainSettings
from train.manifest import Manifest


def finetune_llm(dataset_dir: Path, out_dir: Path, *, init_dir: Path | None, settings: TrainSettings,
                 name: str) -> Manifest:
    from train.trainer import TrainConfig, train_llm

    options = dict(settings.llm_options)
    cfg = TrainConfig(data_dir=str(dataset_dir), base_model=settings.base_model, out=str(out_dir), name=name,
                      workers=settings.workers, use_gpu=settings.use_gpu,
                      init_from=str(init_dir) if init_dir else "", **options)
    return train_llm(cfg)

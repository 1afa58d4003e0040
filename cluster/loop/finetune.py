"""Fine-tuning a candidate of the LLM policy class for the online loop:
`train.trainer.train_llm` with `init_from` = the serving adapter. (The fast policy class is
fine-tuned by `train.fast_finetune.finetune_fast`, which takes the loop's `TrainSettings` as is;
with `train.mode: supervised+rl`, `reinforce_fast` then runs RL from that candidate.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cluster.loop.config import LoopConfig, TrainSettings
from train.manifest import Manifest


def finetune_llm(dataset_dir: Path, out_dir: Path, *, init_dir: Path | None, settings: TrainSettings,
                 name: str) -> Manifest:
    from train.trainer import TrainConfig, train_llm

    options = dict(settings.llm_options)
    cfg = TrainConfig(data_dir=str(dataset_dir), base_model=settings.base_model, out=str(out_dir), name=name,
                      workers=settings.workers, use_gpu=settings.use_gpu,
                      init_from=str(init_dir) if init_dir else "", **options)
    return train_llm(cfg)


def reinforce_fast(supervised_dir: Path, out_dir: Path, config: LoopConfig, cycle: int, echo: Callable[[str], object]
                   ) -> Manifest:
    """RL from verifier reward (train/rl_loop.py) on the loop's tasks, starting from this cycle's
    supervised candidate; the candidate it writes to `out_dir` is the one gated. Its checkpoints
    are dropped once the artifact is written (a crash before then reruns RL from the start)."""
    import shutil

    from train.rl import CHECKPOINT_DIR
    from train.rl_loop import RLSettings, run_rl

    settings = RLSettings(tasks=config.tasks, llm=config.llm, seed=config.seed + cycle, **config.train.rl)
    manifest = run_rl(settings, supervised_dir, out_dir, log=lambda line: echo(f"  rl: {line}"))
    shutil.rmtree(out_dir / CHECKPOINT_DIR, ignore_errors=True)
    supervised = Manifest.load(supervised_dir)
    manifest.name, manifest.version = supervised.name, supervised.version
    manifest.data_versions = [*supervised.data_versions, *manifest.data_versions]
    manifest.metrics = {**supervised.metrics, **manifest.metrics}
    manifest.extra = {**supervised.extra, **manifest.extra}
    manifest.save(out_dir)
    return manifest

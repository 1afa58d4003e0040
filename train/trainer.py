"""LoRA / QLoRA fine-tuning of the orchestrator on Ray Train (`halo train`).

The driver checks everything that can be checked before any worker starts (base model path,
dataset, label set, checkpoint integrity), tokenises the prompts once, and hands the token
lists to a `TorchTrainer` with N workers (DDP; gloo on CPU, NCCL on GPU). Each worker trains
on its shard with the loss on the label token only, evaluates every epoch, and rank 0 writes
checkpoints (trainable weights, optimizer, scheduler, position, curves) into the store next
to the artifact. A later `halo train` on the same --out resumes from the newest valid one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollout.core.agent_table import AGENT_IDS
from solvers.errors import HaloError
from train.base_models import load_tokenizer, resolve_base_model
from train.dataset import DatasetCard, DatasetError, read_split, tokenizer_fingerprint
from train.encoder import ENCODER_VERSION, encode_state
from train.labels import LabelError, choose_label_set, label_set_from_map
from train.manifest import Manifest
from train.train_config import CHECKPOINT_DIR, META_FILE, STATE_FILE, TrainConfig, sha256_file

if TYPE_CHECKING:
    from train.train_worker import WorkerConfig


class CheckpointError(HaloError, RuntimeError):
    pass


class LabelMismatchError(LabelError):
    pass


# ---------------------------------------------------------------- checkpoints


def verify_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint's meta.json, after checking that state.pt is whole and loadable."""
    import torch

    path = Path(path)
    meta_path, state_path = path / META_FILE, path / STATE_FILE
    if not meta_path.is_file() or not state_path.is_file():
        raise CheckpointError(f"checkpoint {path} is incomplete: {META_FILE} or {STATE_FILE} missing")
    try:
        meta = json.loads(meta_path.read_text())
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {path} is corrupted: {META_FILE} is not JSON ({exc})") from exc
    if sha256_file(state_path) != meta.get("sha256"):
        raise CheckpointError(f"checkpoint {path} is corrupted: {STATE_FILE} does not match its recorded sha256 "
                              "(delete it to restart from the previous checkpoint, or pass --no-resume)")
    try:
        torch.load(state_path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001  (any unpickling failure means the same thing)
        raise CheckpointError(f"checkpoint {path} is corrupted: {STATE_FILE} does not load ({exc})") from exc
    return meta


def latest_checkpoint(out: Path) -> Path | None:
    root = out / CHECKPOINT_DIR
    if not root.is_dir():
        return None
    found = [p.parent for p in root.glob("*/checkpoint_*/" + META_FILE)]
    if not found:
        return None
    return max(found, key=lambda p: json.loads((p / META_FILE).read_text()).get("global_step", 0)
               if (p / META_FILE).is_file() else -1)


# ---------------------------------------------------------------- driver


def _prepare_rows(cfg: TrainConfig, tokenizer: Any, label_set: Any, card: DatasetCard) -> dict[str, list]:
    from train.sft import tokenize_prompts

    # Stored prompts are reused only if they were encoded exactly as this run would encode them.
    same_tokenizer = card.tokenizer == tokenizer_fingerprint(tokenizer) and card.encoder_version == ENCODER_VERSION
    out: dict[str, list] = {}
    for split, cap in (("train", cfg.max_train_examples), ("validation", cfg.max_val_examples)):
        rows = read_split(cfg.data_dir, split)
        if cap:
            rows = rows[:cap]
        if same_tokenizer and all(r.get("prompt") for r in rows):
            prompts = [r["prompt"] for r in rows]
        else:
            from rollout.core.state import EpisodeState

            prompts = [encode_state(EpisodeState.from_json(r["state_json"]), tokenizer, ENCODER_VERSION,
                                    label_set.label_map) for r in rows]
        ids = tokenize_prompts(tokenizer, prompts, cfg.max_length)
        out[split] = [(toks, label_set.token_ids[r["agent_id"]], r["agent_id"]) for toks, r in zip(ids, rows,
                                                                                                     strict=True)]
    return out


def check_labels(card: DatasetCard, label_map: dict[int, str], what: str) -> None:
    if card.tokenizer and dict(card.label_map) != dict(label_map):
        diff = [i for i in AGENT_IDS if card.label_map.get(i) != label_map.get(i)][:3]
        raise LabelMismatchError(
            f"the dataset's label set does not match {what}: agent(s) {diff} are labelled "
            f"{[card.label_map.get(i) for i in diff]} in the dataset but {[label_map.get(i) for i in diff]} there "
            "(rebuild the dataset with --tokenizer set to this base model)")


def train_llm(cfg: TrainConfig) -> Manifest:
    """Check the inputs, train on Ray Train (resuming from the newest valid checkpoint under
    cfg.out), and write the model artifact there."""
    out = Path(cfg.out).resolve()
    worker, card, tokenizer, label_map = _prepare(cfg, out)
    result = _fit(cfg, worker, out)
    if result.checkpoint is None:
        raise CheckpointError("training finished without a checkpoint")
    with result.checkpoint.as_directory() as ckpt_dir:
        meta = verify_checkpoint(ckpt_dir)
        if (out / "adapter").exists():
            shutil.rmtree(out / "adapter")
        shutil.copytree(Path(ckpt_dir) / "adapter", out / "adapter")
    tokenizer.save_pretrained(out)
    history = meta["history"]
    return _write_artifact(cfg, out, card, label_map, history, meta)


def _prepare(cfg: TrainConfig, out: Path) -> tuple[WorkerConfig, DatasetCard, Any, dict[int, str]]:
    """Everything checked and tokenised before any worker starts: (the workers' config less their
    thread count, the dataset card, the tokenizer, the label map)."""
    from train.train_worker import WorkerConfig

    base_path = resolve_base_model(cfg.base_model)
    if not Path(cfg.data_dir).is_dir():
        raise DatasetError(f"dataset directory {cfg.data_dir} does not exist")
    card = DatasetCard.load(cfg.data_dir)
    tokenizer = load_tokenizer(base_path)
    label_set = choose_label_set(tokenizer)
    check_labels(card, label_set.label_map, f"the label set of base model {cfg.base_model}")
    init_state = None
    if cfg.init_from:
        prev = Manifest.load(cfg.init_from)
        check_labels(card, prev.label_map, f"the manifest of {cfg.init_from}")
        label_set = label_set_from_map(tokenizer, prev.label_map)
        init_state = str(Path(cfg.init_from, "adapter").resolve())
    rows = _prepare_rows(cfg, tokenizer, label_set, card)
    if not rows["train"]:
        raise DatasetError(f"{cfg.data_dir}: the training split is empty; nothing to train on")
    out.mkdir(parents=True, exist_ok=True)
    resume_from = ""
    if cfg.resume and (ckpt := latest_checkpoint(out)) is not None:
        verify_checkpoint(ckpt)
        resume_from = str(ckpt)
    worker = WorkerConfig(train=cfg, base_path=str(base_path), label_token_ids=list(label_set.token_ids),
                          vocab_size=len(tokenizer), pad_id=tokenizer.pad_token_id, rows=rows, threads=0,
                          init_state=init_state, resume_from=resume_from)
    return worker, card, tokenizer, label_set.label_map


def _fit(cfg: TrainConfig, worker: WorkerConfig, out: Path) -> Any:
    """Ray Train's result of the run (our own in-process Ray unless one is up already)."""
    import ray
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from train.train_worker import WORKER_KEY, train_loop_per_worker

    started_ray = False
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=max(2, cfg.workers), include_dashboard=False, log_to_driver=cfg.progress)
        started_ray = True
    try:
        cpus = float(ray.cluster_resources().get("CPU", 2))
        worker.threads = cfg.threads_per_worker or max(1, int(cpus // cfg.workers))
        trainer = TorchTrainer(
            train_loop_per_worker,
            train_loop_config={WORKER_KEY: worker},
            scaling_config=ScalingConfig(num_workers=cfg.workers, use_gpu=cfg.use_gpu,
                                         resources_per_worker={"CPU": min(worker.threads, cpus / cfg.workers)}),
            run_config=RunConfig(name=f"run-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}",
                                 storage_path=str(out / CHECKPOINT_DIR),
                                 checkpoint_config=CheckpointConfig(num_to_keep=2),
                                 failure_config=FailureConfig(max_failures=cfg.max_failures)),
        )
        return trainer.fit()
    finally:
        if started_ray:
            ray.shutdown()


def _write_artifact(cfg: TrainConfig, out: Path, card: DatasetCard, label_map: dict[int, str],
                    history: dict[str, list], meta: dict[str, Any]) -> Manifest:
    from train.plot import plot_curves

    plot_curves(history, out / "curves.png", title=cfg.name or out.name)
    (out / "history.json").write_text(json.dumps(history, indent=2))
    epochs = history.get("epochs", [])
    last = epochs[-1] if epochs else {}
    metrics = {"global_step": float(meta["global_step"]),
               "train_examples": float(len(read_split(cfg.data_dir, "train"))),
               "majority_agent": float(card.majority_agent), "val_majority_rate": card.majority_rate_validation}
    for key in ("val_loss", "val_accuracy", "train_loss"):
        if key in last:
            metrics[key] = float(last[key])
    manifest = Manifest(
        name=cfg.name or out.name, version=time.strftime("%Y%m%dT%H%M%S", time.gmtime()), policy_class="llm",
        label_map=dict(label_map), encoder_version=ENCODER_VERSION, base_model=cfg.base_model,
        data_versions=[card.dataset_version, *card.sources], metrics=metrics, created_at=time.time(),
        extra={"base_model_path": str(resolve_base_model(cfg.base_model)), "qlora": cfg.qlora,
               "lora": {"r": cfg.lora_r, "alpha": cfg.lora_alpha, "dropout": cfg.lora_dropout, "lm_head": cfg.lm_head},
               "workers": cfg.workers, "global_batch": cfg.global_batch, "lr": cfg.lr, "max_length": cfg.max_length,
               "llm_backends": card.llm_backends})
    manifest.verify()
    manifest.save(out)
    from train.train_tasks import write_train_tasks

    write_train_tasks(out, [r["task_id"] for r in read_split(cfg.data_dir, "train")])
    return manifest

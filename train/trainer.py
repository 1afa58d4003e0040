"""LoRA / QLoRA fine-tuning of the orchestrator on Ray Train (`halo train`).

The driver checks everything that can be checked before any worker starts (base model path,
dataset, label set, checkpoint integrity), tokenises the prompts once, and hands the token
lists to a `TorchTrainer` with N workers (DDP; gloo on CPU, NCCL on GPU). Each worker trains
on its shard with the loss on the label token only, evaluates every epoch, and rank 0 writes
checkpoints (trainable weights, optimizer, scheduler, position, curves) into the store next
to the artifact. A later `halo train` on the same --out resumes from the newest valid one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rollout.core.agent_table import AGENT_IDS
from solvers.errors import HaloError
from train.base_models import load_tokenizer, resolve_base_model
from train.dataset import DatasetCard, DatasetError, read_split, tokenizer_fingerprint
from train.encoder import ENCODER_VERSION, encode_state
from train.labels import LabelError, choose_label_set, label_set_from_map
from train.manifest import Manifest

STATE_FILE = "state.pt"
META_FILE = "meta.json"
CHECKPOINT_DIR = "checkpoints"


class CheckpointError(HaloError, RuntimeError):
    pass


class LabelMismatchError(LabelError):
    pass


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
    # Fault injection for tests: rank 0 raises once after this optimizer step (0: never).
    crash_at_step: int = 0

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.grad_accum * self.workers


# ---------------------------------------------------------------- checkpoints


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    if _sha256(state_path) != meta.get("sha256"):
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
    import ray
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

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

    out = Path(cfg.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    resume_from = ""
    if cfg.resume and (ckpt := latest_checkpoint(out)) is not None:
        verify_checkpoint(ckpt)
        resume_from = str(ckpt)

    started_ray = False
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=max(2, cfg.workers), include_dashboard=False, log_to_driver=cfg.progress)
        started_ray = True
    try:
        cpus = float(ray.cluster_resources().get("CPU", 2))
        threads = cfg.threads_per_worker or max(1, int(cpus // cfg.workers))
        loop_cfg = {**asdict(cfg), "base_path": str(base_path), "label_token_ids": list(label_set.token_ids),
                    "label_map": {str(k): v for k, v in label_set.label_map.items()}, "vocab_size": len(tokenizer),
                    "pad_id": tokenizer.pad_token_id, "rows": rows, "out": str(out), "threads": threads,
                    "init_state": init_state, "resume_from": resume_from}
        trainer = TorchTrainer(
            train_loop_per_worker,
            train_loop_config=loop_cfg,
            scaling_config=ScalingConfig(num_workers=cfg.workers, use_gpu=cfg.use_gpu,
                                         resources_per_worker={"CPU": min(threads, cpus / cfg.workers)}),
            run_config=RunConfig(name=f"run-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}",
                                 storage_path=str(out / CHECKPOINT_DIR),
                                 checkpoint_config=CheckpointConfig(num_to_keep=2),
                                 failure_config=FailureConfig(max_failures=cfg.max_failures)),
        )
        result = trainer.fit()
    finally:
        if started_ray:
            ray.shutdown()
    if result.checkpoint is None:
        raise CheckpointError("training finished without a checkpoint")
    with result.checkpoint.as_directory() as ckpt_dir:
        meta = verify_checkpoint(ckpt_dir)
        if (out / "adapter").exists():
            shutil.rmtree(out / "adapter")
        shutil.copytree(Path(ckpt_dir) / "adapter", out / "adapter")
    tokenizer.save_pretrained(out)
    history = meta["history"]
    return _write_artifact(cfg, out, card, label_set.label_map, history, meta)


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


# ---------------------------------------------------------------- worker


def train_loop_per_worker(c: dict[str, Any]) -> None:  # noqa: C901  (one loop, kept readable in one place)
    import ray.train
    import torch
    import torch.distributed as dist
    from ray.train.torch import prepare_model
    from torch.utils.data import DistributedSampler
    from transformers import get_linear_schedule_with_warmup

    from train.sft import build_model, collate, label_loss, label_predictions, last_position_logits

    torch.set_num_threads(int(c["threads"]))
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.manual_seed(c["seed"])
    device = "cuda" if c["use_gpu"] and torch.cuda.is_available() else "cpu"
    model = build_model(c["base_path"], label_token_ids=c["label_token_ids"], vocab_size=c["vocab_size"],
                        qlora=c["qlora"], lora_r=c["lora_r"], lora_alpha=c["lora_alpha"],
                        lora_dropout=c["lora_dropout"], lm_head=c["lm_head"], device=device,
                        gradient_checkpointing=c["gradient_checkpointing"])
    if c.get("init_state"):
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(model, load_file(str(Path(c["init_state"]) / "adapter_model.safetensors")))
    peft_model = model
    if world > 1:
        model = prepare_model(model, parallel_strategy_kwargs={"find_unused_parameters": False})
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=c["lr"])
    train_rows, val_rows = c["rows"]["train"], c["rows"]["validation"]
    per_step = c["batch_size"] * c["grad_accum"] * world
    steps_per_epoch = max(1, math.ceil(len(train_rows) / per_step))
    total = c["max_steps"] or steps_per_epoch * c["epochs"]
    sched = get_linear_schedule_with_warmup(optim, min(c["warmup_steps"], total), total)
    label_ids = torch.tensor(c["label_token_ids"], device=device)
    history: dict[str, list] = {"steps": [], "epochs": []}
    epoch, step_in_epoch, global_step = 0, 0, 0

    # A restart after a worker failure gets this run's newest checkpoint from Ray; a new run
    # resumes from the newest checkpoint of an earlier run under the same --out.
    ckpt = ray.train.get_checkpoint()
    state = None
    if ckpt is not None:
        with ckpt.as_directory() as d:
            state = torch.load(Path(d) / STATE_FILE, map_location=device, weights_only=False)
    elif c.get("resume_from"):
        state = torch.load(Path(c["resume_from"]) / STATE_FILE, map_location=device, weights_only=False)
    if state is not None:
        for p, saved in zip(params, state["trainable"], strict=True):
            p.data.copy_(saved)
        optim.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        epoch, step_in_epoch, global_step = state["epoch"], state["step_in_epoch"], state["global_step"]
        history = state["history"]

    def all_sum(values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64)
        if world > 1:
            dist.all_reduce(t)
        return t.tolist()

    def evaluate() -> dict[str, float]:
        model.eval()
        mine = val_rows[rank::world]
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(mine), c["batch_size"]):
                batch = collate(mine[i:i + c["batch_size"]], c["pad_id"])
                logits = last_position_logits(model, _to(batch, device))
                loss_sum += float(torch.nn.functional.cross_entropy(logits.float(), batch.labels.to(device),
                                                                    reduction="sum"))
                correct += int((label_predictions(logits, label_ids).cpu() == batch.agents).sum())
        loss_sum, correct, n = all_sum([loss_sum, float(correct), float(len(mine))])
        model.train()
        return {"val_loss": loss_sum / max(n, 1), "val_accuracy": correct / max(n, 1), "val_examples": n}

    def save(metrics: dict[str, Any]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if rank == 0:
                state = {"trainable": [p.detach().cpu() for p in params], "optimizer": optim.state_dict(),
                         "scheduler": sched.state_dict(), "epoch": epoch, "step_in_epoch": step_in_epoch,
                         "global_step": global_step, "history": history}
                torch.save(state, Path(tmp) / STATE_FILE)
                peft_model.save_pretrained(Path(tmp) / "adapter")
                meta = {"sha256": _sha256(Path(tmp) / STATE_FILE), "global_step": global_step, "epoch": epoch,
                        "history": history, "created_at": time.time()}
                (Path(tmp) / META_FILE).write_text(json.dumps(meta))
                checkpoint = ray.train.Checkpoint.from_directory(tmp)
            ray.train.report({k: v for k, v in metrics.items() if not isinstance(v, (list, dict))},
                             checkpoint=checkpoint)

    crash_at = int(c.get("crash_at_step") or 0)
    crash_mark = Path(c["out"]) / ".crash-injected"
    model.train()
    done = global_step >= total
    while not done:
        sampler = DistributedSampler(range(len(train_rows)), num_replicas=world, rank=rank, shuffle=True,
                                     seed=c["seed"], drop_last=False)
        sampler.set_epoch(epoch)
        order = list(sampler)
        micro = c["batch_size"]
        chunk = micro * c["grad_accum"]
        steps_here = math.ceil(len(order) / chunk)
        for s in range(step_in_epoch, steps_here):
            part = order[s * chunk:(s + 1) * chunk]
            loss_sum, n_rows = 0.0, 0
            for k in range(0, len(part), micro):
                rows = [train_rows[i] for i in part[k:k + micro]]
                batch = _to(collate(rows, c["pad_id"]), device)
                last = k + micro >= len(part)
                sync = model.no_sync() if (world > 1 and not last) else _null()
                with sync:
                    logits = last_position_logits(model, batch)
                    loss = label_loss(logits, batch) * len(rows) / chunk
                    loss.backward()
                loss_sum += float(loss.detach()) * chunk
                n_rows += len(rows)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, c["clip"]))
            optim.step()
            sched.step()
            optim.zero_grad(set_to_none=True)
            global_step += 1
            step_in_epoch = s + 1
            total_loss, total_rows = all_sum([loss_sum, float(n_rows)])
            history["steps"].append({"step": global_step, "epoch": epoch, "loss": total_loss / max(total_rows, 1),
                                     "lr": sched.get_last_lr()[0], "grad_norm": grad_norm})
            if c.get("progress") and rank == 0:
                print(f"[halo train] step {global_step}/{total} epoch {epoch} "
                      f"loss {history['steps'][-1]['loss']:.4f} lr {sched.get_last_lr()[0]:.2e}", flush=True)
            done = global_step >= total
            if c["checkpoint_every"] and global_step % c["checkpoint_every"] == 0 and not done:
                save({"global_step": global_step, "loss": history["steps"][-1]["loss"]})
            if crash_at and rank == 0 and global_step == crash_at and not crash_mark.exists():
                crash_mark.parent.mkdir(parents=True, exist_ok=True)
                crash_mark.write_text("crashed once on purpose\n")
                raise RuntimeError(f"injected crash at step {global_step} (crash_at_step)")
            if done:
                break
        end_of_epoch = step_in_epoch >= steps_here
        metrics = evaluate() if val_rows else {}
        epoch_losses = [h["loss"] for h in history["steps"] if h["epoch"] == epoch]
        metrics.update({"epoch": epoch, "global_step": global_step,
                        "train_loss": sum(epoch_losses) / max(len(epoch_losses), 1)})
        history["epochs"].append(metrics)
        if c.get("progress") and rank == 0:
            print(f"[halo train] eval at step {global_step}: " + ", ".join(
                f"{k} {v:.4g}" for k, v in metrics.items() if isinstance(v, float)), flush=True)
        if end_of_epoch:
            epoch += 1
            step_in_epoch = 0
        if not c["max_steps"] and epoch >= c["epochs"]:
            done = True
        save(metrics)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _to(batch: Any, device: str) -> Any:
    from train.sft import Batch

    return Batch(batch.input_ids.to(device), batch.attention_mask.to(device), batch.position_ids.to(device),
                 batch.labels.to(device), batch.agents)

"""One Ray Train worker of `halo train` (train.trainer): restore, train epoch by epoch, evaluate,
checkpoint.

The driver (train.trainer.train_llm) hands every worker a `WorkerConfig`; `train_loop_per_worker`
builds a `TrainingRun` from it and runs it. Each worker trains on its shard with the loss on the
label token only (DDP across workers), evaluates after every epoch (and at the last step), and
rank 0 writes the checkpoints (trainable weights, optimizer, scheduler, position, curves).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.train_config import META_FILE, STATE_FILE, TrainConfig, sha256_file

WORKER_KEY = "worker"  # the one key of the train_loop_config dict Ray passes to each worker


@dataclass
class WorkerConfig:
    """What each worker needs: the run's settings and what the driver prepared for them."""

    train: TrainConfig
    base_path: str
    label_token_ids: list[int]
    vocab_size: int
    pad_id: int
    rows: dict[str, list]  # "train" / "validation": (token ids, label token id, agent id) rows
    threads: int
    init_state: str | None = None  # an earlier artifact's adapter directory to start from
    resume_from: str = ""  # an earlier run's checkpoint under the same --out


@dataclass
class Position:
    """Where training stands; saved in every checkpoint and restored from it."""

    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    history: dict[str, list] = field(default_factory=lambda: {"steps": [], "epochs": []})


def train_loop_per_worker(loop_config: dict[str, WorkerConfig]) -> None:
    TrainingRun(loop_config[WORKER_KEY]).run()


class TrainingRun:
    """The model, optimizer and schedule of one worker, and the steps that move them."""

    def __init__(self, w: WorkerConfig) -> None:
        import ray.train
        import torch

        self.w, self.cfg = w, w.train
        torch.set_num_threads(int(w.threads))
        ctx = ray.train.get_context()
        self.rank, self.world = ctx.get_world_rank(), ctx.get_world_size()
        torch.manual_seed(self.cfg.seed)
        self.device = "cuda" if self.cfg.use_gpu and torch.cuda.is_available() else "cpu"
        self._build_model()
        self._build_optimizer()
        self.label_ids = torch.tensor(w.label_token_ids, device=self.device)
        self.train_rows, self.val_rows = w.rows["train"], w.rows["validation"]
        self.pos = Position()

    def _build_model(self) -> None:
        from ray.train.torch import prepare_model

        from train.sft import build_model

        c = self.cfg
        model = build_model(self.w.base_path, label_token_ids=self.w.label_token_ids, vocab_size=self.w.vocab_size,
                            qlora=c.qlora, lora_r=c.lora_r, lora_alpha=c.lora_alpha, lora_dropout=c.lora_dropout,
                            lm_head=c.lm_head, device=self.device, gradient_checkpointing=c.gradient_checkpointing)
        if self.w.init_state:
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            set_peft_model_state_dict(model, load_file(str(Path(self.w.init_state) / "adapter_model.safetensors")))
        self.peft_model = self.model = model
        if self.world > 1:
            self.model = prepare_model(model, parallel_strategy_kwargs={"find_unused_parameters": False})
        self.params = [p for p in model.parameters() if p.requires_grad]

    def _build_optimizer(self) -> None:
        import torch
        from transformers import get_linear_schedule_with_warmup

        c = self.cfg
        self.optim = torch.optim.AdamW(self.params, lr=c.lr)
        per_step = c.batch_size * c.grad_accum * self.world
        steps_per_epoch = max(1, math.ceil(len(self.w.rows["train"]) / per_step))
        self.total = c.max_steps or steps_per_epoch * c.epochs
        self.sched = get_linear_schedule_with_warmup(self.optim, min(c.warmup_steps, self.total), self.total)

    # ------------------------------------------------------------ restore

    def restore(self) -> None:
        """A restart after a worker failure gets this run's newest checkpoint from Ray; a new run
        resumes from the newest checkpoint of an earlier run under the same --out."""
        import ray.train
        import torch

        ckpt = ray.train.get_checkpoint()
        state = None
        if ckpt is not None:
            with ckpt.as_directory() as d:
                state = torch.load(Path(d) / STATE_FILE, map_location=self.device, weights_only=False)
        elif self.w.resume_from:
            state = torch.load(Path(self.w.resume_from) / STATE_FILE, map_location=self.device, weights_only=False)
        if state is None:
            return
        for p, saved in zip(self.params, state["trainable"], strict=True):
            p.data.copy_(saved)
        self.optim.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        self.pos = Position(state["epoch"], state["step_in_epoch"], state["global_step"], state["history"])

    # ------------------------------------------------------------ the loop

    def run(self) -> None:
        self.restore()
        self.model.train()
        done = self.pos.global_step >= self.total
        while not done:
            end_of_epoch = self.epoch()
            metrics = self.evaluate()
            if end_of_epoch:
                self.pos.epoch += 1
                self.pos.step_in_epoch = 0
            done = self.pos.global_step >= self.total or (not self.cfg.max_steps and self.pos.epoch >= self.cfg.epochs)
            self.checkpoint(metrics)

    def epoch(self) -> bool:
        """The rest of the current epoch, or up to the last step; True when the epoch ended."""
        from torch.utils.data import DistributedSampler

        c, pos = self.cfg, self.pos
        sampler = DistributedSampler(range(len(self.train_rows)), num_replicas=self.world, rank=self.rank,
                                     shuffle=True, seed=c.seed, drop_last=False)
        sampler.set_epoch(pos.epoch)
        order = list(sampler)
        chunk = c.batch_size * c.grad_accum
        steps_here = math.ceil(len(order) / chunk)
        for s in range(pos.step_in_epoch, steps_here):
            self.optimizer_step(order[s * chunk:(s + 1) * chunk])
            pos.step_in_epoch = s + 1
            done = pos.global_step >= self.total
            if c.checkpoint_every and pos.global_step % c.checkpoint_every == 0 and not done:
                self.checkpoint({"global_step": pos.global_step, "loss": pos.history["steps"][-1]["loss"]})
            if c.on_step is not None:
                c.on_step(pos.global_step, self.rank)
            if done:
                break
        return pos.step_in_epoch >= steps_here

    def optimizer_step(self, part: list[int]) -> None:
        """One optimizer step over `part` (indices into the training rows), in micro-batches whose
        gradients are synchronised across workers only at the last one."""
        import torch

        from train.sft import collate, label_loss, last_position_logits

        c, micro = self.cfg, self.cfg.batch_size
        chunk = micro * c.grad_accum
        loss_sum, n_rows = 0.0, 0
        for k in range(0, len(part), micro):
            rows = [self.train_rows[i] for i in part[k:k + micro]]
            batch = _to(collate(rows, self.w.pad_id), self.device)
            last = k + micro >= len(part)
            with self.model.no_sync() if (self.world > 1 and not last) else nullcontext():
                logits = last_position_logits(self.model, batch)
                loss = label_loss(logits, batch) * len(rows) / chunk
                loss.backward()
            loss_sum += float(loss.detach()) * chunk
            n_rows += len(rows)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, c.clip))
        self.optim.step()
        self.sched.step()
        self.optim.zero_grad(set_to_none=True)
        self.pos.global_step += 1
        total_loss, total_rows = self.all_sum([loss_sum, float(n_rows)])
        step = {"step": self.pos.global_step, "epoch": self.pos.epoch, "loss": total_loss / max(total_rows, 1),
                "lr": self.sched.get_last_lr()[0], "grad_norm": grad_norm}
        self.pos.history["steps"].append(step)
        self._say(f"step {step['step']}/{self.total} epoch {step['epoch']} loss {step['loss']:.4f} "
                  f"lr {step['lr']:.2e}")

    # ------------------------------------------------------------ evaluate

    def evaluate(self) -> dict[str, Any]:
        """Validation loss and accuracy over every worker's shard, plus the epoch's mean training
        loss; appended to the history's epochs."""
        pos = self.pos
        metrics = self._validate() if self.val_rows else {}
        epoch_losses = [h["loss"] for h in pos.history["steps"] if h["epoch"] == pos.epoch]
        metrics.update({"epoch": pos.epoch, "global_step": pos.global_step,
                        "train_loss": sum(epoch_losses) / max(len(epoch_losses), 1)})
        pos.history["epochs"].append(metrics)
        self._say(f"eval at step {pos.global_step}: " + ", ".join(
            f"{k} {v:.4g}" for k, v in metrics.items() if isinstance(v, float)))
        return metrics

    def _validate(self) -> dict[str, float]:
        import torch

        from train.sft import collate, label_predictions, last_position_logits

        self.model.eval()
        mine, size = self.val_rows[self.rank::self.world], self.cfg.batch_size
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(mine), size):
                batch = collate(mine[i:i + size], self.w.pad_id)
                logits = last_position_logits(self.model, _to(batch, self.device))
                loss_sum += float(torch.nn.functional.cross_entropy(logits.float(), batch.labels.to(self.device),
                                                                    reduction="sum"))
                correct += int((label_predictions(logits, self.label_ids).cpu() == batch.agents).sum())
        loss_sum, correct, n = self.all_sum([loss_sum, float(correct), float(len(mine))])
        self.model.train()
        return {"val_loss": loss_sum / max(n, 1), "val_accuracy": correct / max(n, 1), "val_examples": n}

    # ------------------------------------------------------------ checkpoint

    def checkpoint(self, metrics: dict[str, Any]) -> None:
        """Report `metrics` to Ray Train; rank 0 attaches a checkpoint of the current position."""
        import ray.train
        import torch

        pos = self.pos
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if self.rank == 0:
                state = {"trainable": [p.detach().cpu() for p in self.params], "optimizer": self.optim.state_dict(),
                         "scheduler": self.sched.state_dict(), "epoch": pos.epoch,
                         "step_in_epoch": pos.step_in_epoch, "global_step": pos.global_step,
                         "history": pos.history}
                torch.save(state, Path(tmp) / STATE_FILE)
                self.peft_model.save_pretrained(Path(tmp) / "adapter")
                meta = {"sha256": sha256_file(Path(tmp) / STATE_FILE), "global_step": pos.global_step,
                        "epoch": pos.epoch, "history": pos.history, "created_at": time.time()}
                (Path(tmp) / META_FILE).write_text(json.dumps(meta))
                checkpoint = ray.train.Checkpoint.from_directory(tmp)
            ray.train.report({k: v for k, v in metrics.items() if not isinstance(v, (list, dict))},
                             checkpoint=checkpoint)

    # ------------------------------------------------------------ helpers

    def all_sum(self, values: list[float]) -> list[float]:
        import torch
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64)
        if self.world > 1:
            dist.all_reduce(t)
        return t.tolist()

    def _say(self, line: str) -> None:
        if self.cfg.progress and self.rank == 0:
            print(f"[halo train] {line}", flush=True)


def _to(batch: Any, device: str) -> Any:
    from train.sft import Batch

    return Batch(batch.input_ids.to(device), batch.attention_mask.to(device), batch.position_ids.to(device),
                 batch.labels.to(device), batch.agents)

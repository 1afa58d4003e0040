"""`halo train`: fine-tune the orchestrator (LoRA/QLoRA on Ray Train) or fit the fast policy."""

from __future__ import annotations

from pathlib import Path

import typer

from solvers.errors import count_handled


def register(app: typer.Typer) -> None:
    @app.command("train")
    def train(
        data: Path = typer.Option(..., "--data", help="dataset directory from `halo dataset build`"),
        out: str = typer.Option(..., "--out", help="artifact directory, e.g. halo-data/models/NAME, or "
                                                   "s3://bucket/prefix/models/NAME (staged locally, then uploaded)"),
        policy_class: str = typer.Option(None, "--policy-class",
                                         help="hashed_linear (the fast policy, under a minute on a CPU; also 'fast') | "
                                              "llm ((Q)LoRA on the base model on Ray Train: minutes to hours); "
                                              "default: llm when --base-model is given, else the fast policy"),
        base_model: str = typer.Option(None, "--base-model", help="model directory, or 'smollm2' (llm only)"),
        workers: int = typer.Option(1, help="Ray Train workers (DDP)"),
        qlora: bool = typer.Option(None, "--qlora/--no-qlora", help="4-bit NF4 base (default: on with CUDA)"),
        epochs: int = typer.Option(3),
        max_steps: int = typer.Option(0, help="stop after this many optimizer steps (0: all epochs)"),
        lr: float = typer.Option(2e-5),
        warmup_steps: int = typer.Option(100),
        batch_size: int = typer.Option(4, help="per-device batch"),
        grad_accum: int = typer.Option(4),
        max_length: int = typer.Option(2048),
        lora_r: int = typer.Option(16),
        lora_alpha: int = typer.Option(32),
        lora_dropout: float = typer.Option(0.05),
        lm_head: str = typer.Option("labels", help="labels | full | none: which LM-head rows train"),
        max_train_examples: int = typer.Option(0, help="cap for short CPU runs (0: all)"),
        max_val_examples: int = typer.Option(0),
        checkpoint_every: int = typer.Option(0, help="extra checkpoint every N steps (0: per epoch)"),
        resume: bool = typer.Option(True, help="resume from the newest checkpoint under --out"),
        init_from: str = typer.Option("", help="continue from a previous artifact (same label set)"),
        address: str = typer.Option("", help="Ray address of an existing cluster ('' = start in-process)"),
        name: str = typer.Option("", help="model name in the manifest (default: --out's last component)"),
    ) -> None:
        """Train a policy; print its metrics and where the artifact is."""
        from train.dataset import DatasetError
        from train.store_io import stage_output, upload_output

        policy_class = policy_class or ("llm" if base_model else "hashed_linear")
        policy_class = {"fast": "hashed_linear"}.get(policy_class, policy_class)
        base_model = base_model or "smollm2"
        if policy_class not in ("llm", "hashed_linear"):
            raise typer.BadParameter("--policy-class must be hashed_linear (fast) or llm")
        name = name or out.rstrip("/").rsplit("/", 1)[-1]
        typer.echo(_plan_line(policy_class, data, base_model, epochs, max_steps, batch_size, grad_accum, workers,
                              max_length, max_train_examples), err=True)
        _quiet_third_party()
        if out.startswith(("s3://", "s3a://")):
            from cluster.preflight import check_store

            check_store(out)  # before training, not at the upload after it
        local_out = stage_output(out)
        try:
            if policy_class == "hashed_linear":
                from train.fast_policy import train_fast_policy_dir

                manifest = train_fast_policy_dir(data, local_out, name=name)
            else:
                manifest = _train_llm(**{**locals(), "out": local_out})
            where = upload_output(local_out, out)
        except (DatasetError, FileNotFoundError, ValueError, RuntimeError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        typer.echo(f"{manifest.policy_class} model {manifest.name} {manifest.version} -> {where}")
        for key, value in sorted(manifest.metrics.items()):
            typer.echo(f"  {key:>20}: {value:.4g}")


def _plan_line(policy_class: str, data: Path, base_model: str, epochs: int, max_steps: int, batch_size: int,
               grad_accum: int, workers: int, max_length: int, max_train_examples: int) -> str:
    """What is about to run, printed before anything heavy starts."""
    from train.dataset import read_split

    try:
        examples = len(read_split(data, "train"))
    except Exception as exc:  # noqa: BLE001  (the training call reports a bad dataset itself)
        count_handled("halo train: plan line", exc)
        return f"training {policy_class} on {data}"
    if policy_class == "hashed_linear":
        return f"training the fast policy (hashed_linear) on {examples} examples from {data} (under a minute on a CPU)"
    if max_train_examples:
        examples = min(examples, max_train_examples)
    per_step = max(1, batch_size * grad_accum * workers)
    steps = max_steps or -(-examples // per_step) * epochs
    return (f"training llm: (Q)LoRA on base model {base_model}, {examples} examples, {epochs} epoch(s), "
            f"{steps} optimizer steps of {per_step} examples at length {max_length} on {workers} worker(s); "
            "each logged step prints its time (--policy-class hashed_linear trains the fast policy in seconds)")


def _quiet_third_party() -> None:
    """transformers, bitsandbytes and friends warn about things a user cannot act on; the variables
    reach the Ray Train workers this process starts."""
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    warnings.filterwarnings("ignore", module=r"(transformers|bitsandbytes|peft|accelerate|torch)(\..*)?")


def _train_llm(**kw: object) -> object:
    import ray
    import torch

    from train.trainer import TrainConfig, train_llm

    qlora = kw["qlora"] if kw["qlora"] is not None else torch.cuda.is_available()
    fields = set(TrainConfig.__dataclass_fields__)
    args = {k: v for k, v in kw.items() if k in fields and k not in {"data", "out", "qlora"}}
    cfg = TrainConfig(data_dir=str(kw["data"]), out=str(kw["out"]), qlora=bool(qlora),
                      use_gpu=torch.cuda.is_available(), progress=True, **args)
    if kw["address"]:
        ray.init(address=str(kw["address"]))
    try:
        return train_llm(cfg)
    finally:
        if kw["address"]:
            ray.shutdown()

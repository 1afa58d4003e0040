"""`halo train`: fine-tune the orchestrator (LoRA/QLoRA on Ray Train) or fit the fast policy."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cluster.commands.options import command, option
from solvers.errors import count_handled

if TYPE_CHECKING:
    from train.manifest import Manifest
    from train.trainer import TrainConfig


@dataclass(kw_only=True)
class Artifact:
    """What is trained from what, and where it goes."""

    data: Path | None = option(None, "--data", help="dataset directory from `halo dataset build` (not with --rl)")
    out: str = option(..., "--out", help="artifact directory, e.g. halo-data/models/NAME, or "
                                         "s3://bucket/prefix/models/NAME (staged locally, then uploaded)")
    policy_class: str = option(None, "--policy-class",
                               help="hashed_linear (the fast policy, under a minute on a CPU; also 'fast') | "
                                    "llm ((Q)LoRA on the base model on Ray Train: minutes to hours); "
                                    "default: llm when --base-model is given, else the fast policy")
    base_model: str = option(None, "--base-model", help="model directory, or 'smollm2' (llm only)")
    name: str = option("", help="model name in the manifest (default: --out's last component)")
    init_from: str = option("", help="continue from a previous artifact (same label set); with --rl, the "
                                     "supervised fast policy RL starts from")


@dataclass(kw_only=True)
class Model:
    """The adapter and the inputs it sees (llm only)."""

    qlora: bool = option(None, "--qlora/--no-qlora", help="4-bit NF4 base (default: on with CUDA)")
    lora_r: int = option(16)
    lora_alpha: int = option(32)
    lora_dropout: float = option(0.05)
    lm_head: str = option("labels", help="labels | full | none: which LM-head rows train")
    max_length: int = option(2048)


@dataclass(kw_only=True)
class Schedule:
    """How long and on what (llm only): TrainConfig fields of the same names."""

    epochs: int = option(3)
    max_steps: int = option(0, help="stop after this many optimizer steps (0: all epochs)")
    lr: float = option(2e-5)
    warmup_steps: int = option(100)
    batch_size: int = option(4, help="per-device batch")
    grad_accum: int = option(4)
    max_train_examples: int = option(0, help="cap for short CPU runs (0: all)")
    max_val_examples: int = option(0)
    checkpoint_every: int = option(0, help="extra checkpoint every N steps (0: per epoch)")
    resume: bool = option(True, help="resume from the newest checkpoint under --out")


@dataclass(kw_only=True)
class Cluster:
    """Where it runs (llm only)."""

    workers: int = option(1, help="Ray Train workers (DDP)")
    address: str = option("", help="Ray address of an existing cluster ('' = start in-process)")


@dataclass(kw_only=True)
class Reinforce:
    """RL from verifier reward (--rl): the fast policy from --init-from, fine-tuned on rollouts."""

    rl: bool = option(False, "--rl", help="on-policy RL of the fast policy in --init-from on --tasks (docs/train.md)")
    tasks: str = option("", "--tasks", help="training task spec for --rl, e.g. gen:DIR")
    iterations: int = option(20, help="--rl: update steps (a rerun with the same --out resumes)")
    tasks_per_iter: int = option(16, help="--rl: tasks drawn per iteration")
    group: int = option(4, help="--rl: episodes per task and world seed (the baseline is their mean)")
    price_per_call: float = option(0.02, help="--rl: reward lost per LLM call (success is worth 1)")
    rl_lr: float = option(0.5, help="--rl: step size")
    pull: float = option(0.05, help="--rl: L2 pull towards the --init-from weights")
    temperature: float = option(1.0, help="--rl: of the sampling softmax during rollouts")
    adv_norm: str = option("none", help="--rl: advantage normalisation: none, group (by its std) or batch")
    rl_epochs: int = option(1, help="--rl: gradient steps per batch (above 1: on the clipped surrogate, --clip)")
    clip: float = option(0.0, help="--rl: PPO-style clip of the probability ratio (0: none)")
    entropy: float = option(0.0, help="--rl: entropy bonus of the sampling policy")
    max_kl: float = option(0.0, help="--rl: trust region, mean KL (nats) from the sampling policy per update (0: none)")
    advantage: str = option("group", help="--rl: group (episode reward - its group's mean), fork (per state: "
                                          "forked branches of the top agents, finished by the argmax) or exit "
                                          "(expert iteration: refit on the verifier-guided search's accepted paths)")
    fork_k: int = option(3, help="--rl --advantage fork: top agents tried at a forked state (plus the sampled one)")
    fork_states: int = option(2, help="--rl --advantage fork: model-decided states forked per episode")
    fork_samples: int = option(1, help="--rl --advantage fork: branches per tried agent (their mean reward; "
                                       "replicates after the first resample the world)")
    exit_calls: int = option(20, help="--rl --advantage exit: the search's LLM-call budget per training episode")
    seed: int = option(0, help="--rl: draws of tasks, world seeds and the policy's samples")
    concurrency: int = option(4, help="--rl: episodes in flight")
    llm: str = option("sim:scale=0", help="--rl: the simulated world the episodes run in")


@dataclass(kw_only=True)
class ValueModel:
    """The search's value model (--value): trained from stored runs, failed episodes included."""

    value: bool = option(False, "--value", help="train the search's value model (search:...,value=DIR) from "
                                                 "--from runs (docs/train.md)")
    sources: list[str] | None = option(None, "--from", help="--value: STORE/RUN (repeatable), e.g. halo-data/run-7")
    held_out: float = option(0.2, help="--value: share of tasks held out for the calibration figures")
    value_features: str = option("all", help="--value: all (the fast policy's features) or state (without the "
                                             "step number and agent history)")


def register(app: typer.Typer) -> None:
    app.command("train")(command(train, Artifact, Model, Schedule, Cluster, Reinforce, ValueModel))


def train(artifact: Artifact, model: Model, schedule: Schedule, cluster: Cluster, reinforce: Reinforce,
          value: ValueModel) -> None:
    """Train a policy or the search's value model; print its metrics and where the artifact is."""
    from train.dataset import DatasetError
    from train.store_io import stage_output, upload_output

    if value.value:
        from cluster.commands.train_value import train_value

        return train_value(artifact, value.sources or [], value.held_out, value.value_features)
    if reinforce.rl:
        return _train_rl(artifact, reinforce)
    if artifact.data is None:
        raise typer.BadParameter("--data is required (a dataset from `halo dataset build`), or use --rl")
    policy_class = _policy_class(artifact)
    out = artifact.out
    typer.echo(_plan_line(policy_class, artifact, model, schedule, cluster), err=True)
    _quiet_third_party()
    if out.startswith(("s3://", "s3a://")):
        from cluster.preflight import check_store

        check_store(out)  # before training, not at the upload after it
    local_out = stage_output(out)
    try:
        if policy_class == "hashed_linear":
            from train.fast_policy import train_fast_policy_dir

            manifest = train_fast_policy_dir(artifact.data, local_out, name=_name(artifact))
        else:
            manifest = _train_llm(train_config(artifact, model, schedule, cluster, local_out), cluster.address)
        where = upload_output(local_out, out)
    except (DatasetError, FileNotFoundError, ValueError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"{manifest.policy_class} model {manifest.name} {manifest.version} -> {where}")
    for key, value in sorted(manifest.metrics.items()):
        typer.echo(f"  {key:>20}: {value:.4g}")


def _policy_class(artifact: Artifact) -> str:
    policy_class = artifact.policy_class or ("llm" if artifact.base_model else "hashed_linear")
    policy_class = {"fast": "hashed_linear"}.get(policy_class, policy_class)
    if policy_class not in ("llm", "hashed_linear"):
        raise typer.BadParameter("--policy-class must be hashed_linear (fast) or llm")
    return policy_class


def _name(artifact: Artifact) -> str:
    return artifact.name or artifact.out.rstrip("/").rsplit("/", 1)[-1]


def train_config(artifact: Artifact, model: Model, schedule: Schedule, cluster: Cluster, out: Path | str
                 ) -> TrainConfig:
    """The LLM run's TrainConfig from the command's options (written to `out`, the local staging
    directory); QLoRA and the GPU default to on where CUDA is."""
    import torch

    from train.trainer import TrainConfig

    qlora = model.qlora if model.qlora is not None else torch.cuda.is_available()
    return TrainConfig(data_dir=str(artifact.data), out=str(out), base_model=artifact.base_model or "smollm2",
                       name=_name(artifact), init_from=artifact.init_from, workers=cluster.workers,
                       **{**asdict(model), "qlora": bool(qlora)}, **asdict(schedule),
                       use_gpu=torch.cuda.is_available(), progress=True)


def _plan_line(policy_class: str, artifact: Artifact, model: Model, schedule: Schedule, cluster: Cluster) -> str:
    """What is about to run, printed before anything heavy starts."""
    from train.dataset import read_split

    data = artifact.data
    try:
        examples = len(read_split(data, "train"))
    except Exception as exc:  # noqa: BLE001  (the training call reports a bad dataset itself)
        count_handled("halo train: plan line", exc)
        return f"training {policy_class} on {data}"
    if policy_class == "hashed_linear":
        return f"training the fast policy (hashed_linear) on {examples} examples from {data} (under a minute on a CPU)"
    if schedule.max_train_examples:
        examples = min(examples, schedule.max_train_examples)
    per_step = max(1, schedule.batch_size * schedule.grad_accum * cluster.workers)
    steps = schedule.max_steps or -(-examples // per_step) * schedule.epochs
    return (f"training llm: (Q)LoRA on base model {artifact.base_model or 'smollm2'}, {examples} examples, "
            f"{schedule.epochs} epoch(s), {steps} optimizer steps of {per_step} examples at length "
            f"{model.max_length} on {cluster.workers} worker(s); each logged step prints its time "
            "(--policy-class hashed_linear trains the fast policy in seconds)")


def _quiet_third_party() -> None:
    """transformers, bitsandbytes and friends warn about things a user cannot act on; the variables
    reach the Ray Train workers this process starts."""
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    warnings.filterwarnings("ignore", module=r"(transformers|bitsandbytes|peft|accelerate|torch)(\..*)?")


def _train_llm(cfg: TrainConfig, address: str) -> Manifest:
    import ray

    from train.trainer import train_llm

    if address:
        ray.init(address=address)
    try:
        return train_llm(cfg)
    finally:
        if address:
            ray.shutdown()


def _train_rl(artifact: Artifact, reinforce: Reinforce) -> None:
    """`halo train --rl`: train.rl_loop.run_rl from --init-from on --tasks, resumable under --out."""
    from solvers.errors import InputError
    from train.manifest import ManifestError
    from train.rl_loop import RLSettings, run_rl

    if not artifact.init_from or not reinforce.tasks:
        raise typer.BadParameter("--rl needs --init-from (a fast-policy artifact) and --tasks")
    if artifact.out.startswith(("s3://", "s3a://")):
        raise typer.BadParameter("--rl writes a local --out (its checkpoints live there); upload the artifact after")
    fields = {k: v for k, v in asdict(reinforce).items() if k not in ("rl", "rl_lr", "rl_epochs")}
    settings = RLSettings(**fields, lr=reinforce.rl_lr, epochs=reinforce.rl_epochs)
    try:
        manifest = run_rl(settings, Path(artifact.init_from), Path(artifact.out),
                          log=lambda line: typer.echo(line, err=True))
    except (InputError, ManifestError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"{manifest.policy_class} model {manifest.name} {manifest.version} (RL) -> {artifact.out}")
    for key, value in sorted(manifest.metrics.items()):
        typer.echo(f"  {key:>28}: {value:.4g}")

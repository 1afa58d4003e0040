"""Settings of the online learning loop (`halo loop --config loop.yaml`); see docs/loop.md.

Every key is optional except where noted; unknown keys are refused so a typo does not silently
keep a default.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from cluster.config import Settings
from solvers.errors import InputError

POLICY_CLASSES = ("fast", "llm")
FILTERS = ("oracle", "validator")


class LoopConfigError(InputError, ValueError):
    pass


GATE_MODES = ("sequential", "always")
TRAIN_MODES = ("supervised", "supervised+rl")
RL_KEYS = ("iterations", "tasks_per_iter", "group", "price_per_call", "lr", "pull", "temperature", "concurrency",
           "adv_norm", "epochs", "clip", "entropy", "max_kl", "advantage", "fork_k", "fork_states",
           "fork_samples", "exit_calls")


@dataclass
class GateConfig:
    """The promotion gate (cluster/loop/gate.py): a sequential test on paired held-out episodes."""

    # P(promoting a candidate that is not better and not cheaper-and-non-inferior), at any stopping time
    alpha: float = 0.05
    # the smallest oracle-success gain worth promoting (a share: 0.05 = 5 points); the gate stops and
    # keeps the serving model once the candidate is shown to be below it (with error rate `beta`)
    min_effect: float = 0.05
    beta: float = 0.2
    # a candidate that saves at least min_calls_saving LLM calls per episode is promoted if its
    # oracle success is shown to be at most this much below the serving model's
    noninferiority_margin: float = 0.02
    min_calls_saving: float = 0.5
    # Episodes per held-out task and batch for each of the two policies (same seeds for both); the
    # gate looks after every batch and stops when the answer is clear or max_episodes are spent.
    episodes_per_task: int = 1
    max_episodes: int = 400  # paired episodes per side, at most
    seed: int = 1000
    # "always": promote every candidate (the episodes still run and are recorded; for tests and
    # bootstrapping only, it has no error control)
    mode: str = "sequential"

    def check(self) -> None:
        for key in ("alpha", "beta"):
            if not 0.0 < getattr(self, key) < 0.5:
                raise LoopConfigError(f"gate.{key}: must be in (0, 0.5), got {getattr(self, key)}")
        if not 0.0 < self.min_effect <= 1.0:
            raise LoopConfigError(f"gate.min_effect: must be in (0, 1], got {self.min_effect}")
        if not 0.0 <= self.noninferiority_margin < 1.0:
            raise LoopConfigError(f"gate.noninferiority_margin: must be in [0, 1), got {self.noninferiority_margin}")
        if self.min_calls_saving <= 0:
            raise LoopConfigError(f"gate.min_calls_saving: must be > 0, got {self.min_calls_saving}")
        if self.episodes_per_task < 1 or self.max_episodes < 1:
            raise LoopConfigError("gate.episodes_per_task and gate.max_episodes: must be at least 1")
        if self.mode not in GATE_MODES:
            raise LoopConfigError(f"gate.mode: {self.mode!r} (want {' or '.join(GATE_MODES)})")


@dataclass
class TrainSettings:
    workers: int = 1  # Ray Train workers
    use_gpu: bool = False
    # Fast policy class (hashed linear, warm-started from the serving weights).
    epochs: int = 60
    lr: float = 0.2
    l2: float = 1e-4
    # LLM policy class (train.trainer): base model and options passed to TrainConfig.
    base_model: str = ""
    llm_options: dict[str, Any] = field(default_factory=dict)
    # "supervised+rl" (fast class only): after the supervised fine-tune, RL from verifier reward
    # starts from it on the loop's `tasks` (train/rl_loop.py); `rl` holds RLSettings fields
    # (iterations, tasks_per_iter, group, price_per_call, lr, pull, temperature, concurrency).
    mode: str = "supervised"
    rl: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoopConfig:
    name: str = "default"  # several loops may share a store; each has its own event log
    store: str = ""  # trajectory store URL; default $HALO_STORE_URL or ./halo-data
    work_dir: str = "./halo-loop"  # local scratch (datasets, artifacts before upload, Ray results)
    tasks: str = "planbench:blocksworld"  # tasks of the scheduled student rollouts
    holdout_tasks: str = "planbench:blocksworld:10"  # fixed held-out set: gated on, never trained on
    policy_class: str = "fast"
    llm: str = "sim"  # LLM backend of rollouts and gate episodes; data of other backends is ignored
    accept_filter: str = "oracle"  # which verdict makes an episode "accepted"
    min_new_episodes: int = 200  # retrain once this many new accepted episodes exist ...
    max_period_s: float = 6 * 3600.0  # ... or this long after the last training (with >= 1 new)
    old_data_share: float = 0.3  # share of the dataset drawn from data earlier cycles used
    max_feedback_key_share: float = 0.2  # most of a dataset one /v1/feedback key's episodes may be
    rollout_episodes: int = 100  # scheduled student rollouts per batch (0: feedback only)
    max_rollout_batches: int = 5  # per cycle, before waiting for feedback instead
    rollout_replicas: int | None = None
    max_steps: int = 10
    seed: int = 0
    poll_s: float = 30.0
    max_cycles: int = 0  # 0: run until stopped
    serve_url: str = "http://127.0.0.1:8000"
    initial_model: str = ""  # used when the service has no model yet
    # Also copy each promoted model to this store path (e.g. models/current), where a freshly
    # started decision service (a RayService cluster upgrade) finds the model last promoted.
    publish_as: str = ""
    address: str | None = None  # Ray cluster to join (None: in-process, or RAY_ADDRESS)
    gate: GateConfig = field(default_factory=GateConfig)
    train: TrainSettings = field(default_factory=TrainSettings)

    def __post_init__(self) -> None:
        if not self.store:
            self.store = Settings.from_env().store_url

    def validate(self) -> LoopConfig:
        if not self.name or not all(c.isalnum() or c in "-_" for c in self.name):
            raise LoopConfigError(f"name: {self.name!r} must be letters, digits, - or _")
        if self.policy_class not in POLICY_CLASSES:
            raise LoopConfigError(f"policy_class: {self.policy_class!r} (want {' or '.join(POLICY_CLASSES)})")
        if self.accept_filter not in FILTERS:
            raise LoopConfigError(f"accept_filter: {self.accept_filter!r} (want {' or '.join(FILTERS)})")
        if self.min_new_episodes < 1:
            raise LoopConfigError("min_new_episodes: must be at least 1")
        if not 0.0 <= self.old_data_share < 1.0:
            raise LoopConfigError("old_data_share: must be in [0, 1)")
        if not 0.0 <= self.max_feedback_key_share < 1.0:
            raise LoopConfigError("max_feedback_key_share: must be in [0, 1)")
        if self.max_period_s <= 0 or self.poll_s <= 0:
            raise LoopConfigError("max_period_s and poll_s must be positive")
        if self.rollout_episodes < 0 or self.max_rollout_batches < 0 or self.max_cycles < 0:
            raise LoopConfigError("rollout_episodes, max_rollout_batches and max_cycles must not be negative")
        if not self.serve_url.startswith(("http://", "https://")):
            raise LoopConfigError(f"serve_url: {self.serve_url!r} is not an http(s) URL")
        self.gate.check()
        if self.train.workers < 1 or self.train.epochs < 1 or self.train.lr <= 0:
            raise LoopConfigError("train.workers and train.epochs must be at least 1, train.lr positive")
        if self.policy_class == "llm" and not self.train.base_model:
            raise LoopConfigError("train.base_model: required for policy_class llm")
        self._check_train_mode()
        return self

    def _check_train_mode(self) -> None:
        if self.train.mode not in TRAIN_MODES:
            raise LoopConfigError(f"train.mode: {self.train.mode!r} (want {' or '.join(TRAIN_MODES)})")
        if self.train.mode == "supervised+rl" and self.policy_class != "fast":
            raise LoopConfigError("train.mode supervised+rl: RL fine-tunes the fast policy (policy_class fast)")
        unknown = sorted(set(self.train.rl) - set(RL_KEYS))
        if unknown:
            raise LoopConfigError(f"train.rl: unknown key(s) {', '.join(unknown)} (known: {', '.join(RL_KEYS)})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def identity_hash(self) -> str:
        """What must not change under a running loop's event log (what it trains and gates on)."""
        ident = {k: getattr(self, k) for k in ("tasks", "holdout_tasks", "policy_class", "llm", "accept_filter")}
        ident["gate_seed"] = self.gate.seed
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoopConfig:
        if not isinstance(data, dict):
            raise LoopConfigError("a loop config is a mapping of settings")
        data = dict(data)
        _refuse_unknown(cls, data, "")
        for key, sub in (("gate", GateConfig), ("train", TrainSettings)):
            value = data.get(key, {}) or {}
            if not isinstance(value, dict):
                raise LoopConfigError(f"{key}: must be a mapping")
            _refuse_unknown(sub, value, f"{key}.")
            data[key] = sub(**value)
        try:
            return cls(**data).validate()
        except TypeError as exc:
            raise LoopConfigError(str(exc)) from exc

    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> LoopConfig:
        import yaml

        path = Path(path)
        if not path.is_file():
            raise LoopConfigError(f"{path}: no such config file")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise LoopConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise LoopConfigError(f"{path}: a loop config is a YAML mapping")
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(data)


def _refuse_unknown(cls: type, data: dict[str, Any], prefix: str) -> None:
    unknown = sorted(set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise LoopConfigError(f"unknown loop config key(s): {', '.join(prefix + k for k in unknown)}")

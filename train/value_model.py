"""The search's value model: logistic regression from a state's hashed features (train/features.py,
the fast policy's) to the chance that the episode it is in ends in oracle success.

Examples come from stored episodes, failed ones included (the supervised dataset keeps only
accepted ones, so this reads the records itself): every state on an episode's chosen path (a
search episode's explored branches are dropped, as in train/examples.chosen_path), labelled
with that episode's oracle outcome; a state repeated within an episode counts once. Episodes
that broke (an infrastructure failure or an exception) or have no gold answer are left out. A
share of the tasks (by a hash of the task ID) is held out; the manifest records the held-out
Brier score and AUC next to the base rate (the Brier score of always predicting it).

Artifact directory: manifest.json (policy_class "value_linear", the features version, the
training data's hash) + value.npz (the buckets seen in training, their weights, the bias).
`search:...,value=DIR` loads it through `load_value_model` (rollout/policies/search_value.py).
"""

from __future__ import annotations

import hashlib
import math
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, is_infra_failure
from solvers.errors import InputError
from train.encoder import ENCODER_VERSION
from train.fast_policy import ID_LABELS, hashed_design
from train.features import DEFAULT_BUCKETS, FEATURE_VERSION, FEATURE_VERSIONS, hash_features, state_features
from train.manifest import Manifest, ManifestError

VALUE_CLASS = "value_linear"
WEIGHTS_FILE = "value.npz"
DEFAULT_C = 0.5  # inverse L2 strength, as the fast policy's
# Which of the fast policy's features the model reads: "all", or "state" (without the step number
# and the agent history, so the estimate speaks of the PDDL and the verdicts, not of how deep the
# node is: the search weighs depth itself).
FEATURE_SETS = ("all", "state")
_HISTORY_PREFIXES = ("step=", "last=", "last2=", "tried=", "tried2=", "cat_last=", "code_last=", "ctx1=", "ctx2=",
                     "ctx3=")


def value_features(state: EpisodeState, version: str = FEATURE_VERSION, feature_set: str = "all") -> list[str]:
    """The fast policy's features of `state`, all of them or only those of `feature_set`."""
    feats = state_features(state, version)
    if feature_set == "state":
        return [f for f in feats if not f.startswith(_HISTORY_PREFIXES)]
    return feats


class ValueDataError(InputError, ValueError):
    """Episodes a value model cannot be trained from; the message says what is missing."""


@dataclass(frozen=True)
class ValueExample:
    task_id: str
    episode_id: str
    state_json: str
    success: bool

    @property
    def state(self) -> EpisodeState:
        return EpisodeState.from_json(self.state_json)


def value_examples(episodes: Iterable[EpisodeRecord]) -> list[ValueExample]:
    """(state on the chosen path, the episode's oracle outcome) of every usable episode."""
    out: list[ValueExample] = []
    for ep in episodes:
        if ep.error or is_infra_failure(ep) or ep.success_oracle is None:
            continue
        seen: set[str] = set()
        for st in ep.steps:
            if st.on_path is False or st.state_json in seen:
                continue
            seen.add(st.state_json)
            out.append(ValueExample(ep.task_id, ep.episode_id, st.state_json, bool(ep.success_oracle)))
    return out


def held_out_tasks(task_ids: Iterable[str], fraction: float, seed: int = 0) -> set[str]:
    """About `fraction` of the tasks, chosen by a hash of their IDs (stable across runs)."""
    return {t for t in set(task_ids) if zlib.crc32(f"value:{seed}:{t}".encode()) % 1000 < fraction * 1000}


def data_hash(examples: list[ValueExample]) -> str:
    """sha256 of the examples (state and label, in a fixed order): the training data's identity."""
    digest = hashlib.sha256()
    for line in sorted(f"{e.success:d}\x00{e.state_json}" for e in examples):
        digest.update(line.encode())
        digest.update(b"\x01")
    return digest.hexdigest()


class ValueModel:
    """P(oracle success | state) from the weights of the buckets seen in training."""

    def __init__(self, buckets: np.ndarray, weights: np.ndarray, bias: float, n_buckets: int, *,
                 feature_version: str = FEATURE_VERSION, version: str = "0", name: str = "value",
                 feature_set: str = "all") -> None:
        if weights.shape != (len(buckets),):
            raise ManifestError(f"value weights have shape {weights.shape}, want ({len(buckets)},)")
        if feature_version not in FEATURE_VERSIONS:
            raise ManifestError(f"feature set {feature_version!r} is not computed by this version (it computes "
                                f"{', '.join(FEATURE_VERSIONS)}); retrain the value model")
        if feature_set not in FEATURE_SETS:
            raise ManifestError(f"feature set {feature_set!r} unknown (known: {', '.join(FEATURE_SETS)})")
        self.feature_set = feature_set
        self._rows = {int(b): i for i, b in enumerate(buckets)}
        self._weights = weights.astype(np.float64)
        self._bias = float(bias)
        self._n_buckets = int(n_buckets)
        self.feature_version = feature_version
        self.version = version
        self.name = name

    def logit(self, state: EpisodeState) -> float:
        feats = value_features(state, self.feature_version, self.feature_set)
        rows = [self._rows[b] for b in hash_features(feats, self._n_buckets) if b in self._rows]
        return self._bias + float(self._weights[rows].sum()) if rows else self._bias

    def predict(self, state: EpisodeState) -> float:
        """The estimated chance, in (0, 1), that an episode in `state` ends in oracle success."""
        z = self.logit(state)
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def save(self, out: Path) -> None:
        buckets = np.array(sorted(self._rows, key=self._rows.__getitem__), dtype=np.int64)
        np.savez_compressed(out / WEIGHTS_FILE, buckets=buckets, weights=self._weights,
                            bias=np.float64(self._bias), n_buckets=np.int64(self._n_buckets))


def load_value_model(model_dir: str | Path) -> ValueModel:
    """The value model in `model_dir`; ManifestError (one line) when it is not one or is damaged."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ManifestError(f"{model_dir}: no such directory (a value model from `halo train --value`)")
    manifest = Manifest.load(model_dir)
    if manifest.policy_class != VALUE_CLASS:
        raise ManifestError(f"{model_dir}: a {manifest.policy_class!r} artifact, not a value model "
                            f"({VALUE_CLASS!r}, from `halo train --value`)")
    path = model_dir / WEIGHTS_FILE
    try:
        with np.load(path) as data:
            buckets, weights = data["buckets"], data["weights"]
            bias, n_buckets = float(data["bias"]), int(data["n_buckets"])
    except (KeyError, ValueError, OSError) as exc:
        raise ManifestError(f"{path}: missing or unreadable value weights: {exc}") from exc
    return ValueModel(buckets, weights, bias, n_buckets, name=manifest.name, version=manifest.version,
                      feature_version=str(manifest.extra.get("feature_version", "")),
                      feature_set=str(manifest.extra.get("feature_set", "all")))


def fit_value(train: list[ValueExample], *, n_buckets: int = DEFAULT_BUCKETS, c: float = DEFAULT_C,
              seed: int = 0, feature_set: str = "all") -> tuple[np.ndarray, np.ndarray, float]:
    """Fit on examples holding both outcomes; returns (buckets, weights[k], bias)."""
    from sklearn.linear_model import LogisticRegression

    used, x = hashed_design([hash_features(value_features(e.state, feature_set=feature_set), n_buckets)
                             for e in train])
    y = np.array([int(e.success) for e in train])
    clf = LogisticRegression(C=c, max_iter=1000, random_state=seed)
    clf.fit(x, y)
    return used, clf.coef_[0].astype(np.float64), float(clf.intercept_[0])


def auc(scores: list[float], labels: list[bool]) -> float:
    """The chance a random success scores above a random failure (ties count half)."""
    from scipy.stats import rankdata

    n_pos = sum(labels)
    n_neg = len(labels) - n_pos
    if not n_pos or not n_neg:
        return float("nan")
    ranks = rankdata(scores)
    pos_rank_sum = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return float((pos_rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def calibration(model: ValueModel, examples: list[ValueExample], base_rate: float) -> dict[str, float]:
    """Brier score and AUC of the model on `examples`, and the Brier score of predicting `base_rate`."""
    preds = [model.predict(e.state) for e in examples]
    labels = [e.success for e in examples]
    return {"brier": float(np.mean([(p - y) ** 2 for p, y in zip(preds, labels, strict=True)])),
            "brier_base_rate": float(np.mean([(base_rate - y) ** 2 for y in labels])),
            "auc": auc(preds, labels)}


def _split(examples: list[ValueExample], val_fraction: float) -> tuple[list[ValueExample], list[ValueExample]]:
    """(train, held out) by task; both sides must hold successes and failures."""
    n_eps = len({e.episode_id for e in examples})
    if not examples:
        raise ValueDataError("no usable episodes: none with states, an oracle verdict and no infrastructure failure")
    for outcome, word in ((True, "successful"), (False, "failed")):
        if not any(e.success is outcome for e in examples):
            raise ValueDataError(f"no {word} episodes among {n_eps}: a value model needs both oracle outcomes")
    held = held_out_tasks((e.task_id for e in examples), val_fraction)
    train = [e for e in examples if e.task_id not in held]
    test = [e for e in examples if e.task_id in held]
    for side, name in ((train, "training"), (test, "held-out")):
        if len({e.success for e in side}) < 2:
            raise ValueDataError(f"the {name} tasks ({len({e.task_id for e in side})}) do not hold both successful "
                                 f"and failed episodes; add episodes or change the held-out share ({val_fraction})")
    return train, test


def train_value_model(episodes: Iterable[EpisodeRecord], out_dir: str | Path, *, name: str = "value",
                      data_versions: list[str] | None = None, val_fraction: float = 0.2,
                      c: float = DEFAULT_C, n_buckets: int = DEFAULT_BUCKETS, feature_set: str = "all") -> Manifest:
    """Fit, measure on the held-out tasks, write the artifact; returns its manifest."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueDataError(f"the held-out share must be between 0 and 1, got {val_fraction}")
    if feature_set not in FEATURE_SETS:
        raise ValueDataError(f"feature set {feature_set!r} unknown (known: {', '.join(FEATURE_SETS)})")
    examples = value_examples(episodes)
    train, test = _split(examples, val_fraction)
    t0 = time.perf_counter()
    buckets, weights, bias = fit_value(train, n_buckets=n_buckets, c=c, feature_set=feature_set)
    version = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    model = ValueModel(buckets, weights, bias, n_buckets, version=version, name=name, feature_set=feature_set)
    base = sum(e.success for e in train) / len(train)
    held = calibration(model, test, base)
    metrics = {"train_states": float(len(train)), "held_out_states": float(len(test)),
               "train_episodes": float(len({e.episode_id for e in train})),
               "held_out_episodes": float(len({e.episode_id for e in test})),
               "train_success_rate": base, "fit_s": time.perf_counter() - t0,
               **{f"held_out_{k}": v for k, v in held.items()}}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out)
    manifest = Manifest(name=name, version=version, policy_class=VALUE_CLASS, label_map=dict(ID_LABELS),
                        encoder_version=ENCODER_VERSION, data_versions=list(data_versions or []),
                        metrics=metrics, created_at=time.time(),
                        extra={"feature_version": FEATURE_VERSION, "feature_set": feature_set,
                               "n_buckets": n_buckets, "c": c,
                               "nonzero_buckets": len(buckets), "target": "success_oracle",
                               "training_data_sha256": data_hash(train), "held_out_share": val_fraction})
    manifest.verify()
    manifest.save(out)
    return manifest

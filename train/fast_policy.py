"""The fast policy: multinomial logistic regression over hashed state features.

Deciding is a few hundred dictionary look-ups and a 21-way argmax, orders of magnitude cheaper
than a forward pass of even a small language model; the first time a (domain, problem) pair is
seen with a planner or validator verdict, the relaxed reachability read (train/reachability.py,
cached) adds its cost once (docs/results/2026-12-03-code-figures.md). Only the feature buckets seen in
training carry weight (the rest are exactly zero under L2), so the artifact stores those rows.

Artifact directory: manifest.json (policy_class "hashed_linear") + weights.npz.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rollout.core.agent_table import AGENT_IDS, NUM_AGENTS, AgentId
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord
from solvers.errors import InputError
from train.encoder import ENCODER_VERSION
from train.examples import Example, select_examples, split_by_task
from train.features import DEFAULT_BUCKETS, FEATURE_VERSION, FEATURE_VERSIONS, hash_features, state_features
from train.manifest import Manifest, ManifestError

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

POLICY_CLASS = "hashed_linear"
RETRY_PRIORS = ("fresh", "model")  # HashedLinearPolicy.next_ranked's prior
WEIGHTS_FILE = "weights.npz"
# The fast policy's labels are the plain IDs: it has no tokenizer.
ID_LABELS = {i: str(i) for i in AGENT_IDS}


class EmptyDatasetError(InputError, ValueError):
    pass


class HashedLinearPolicy(Policy):
    decides_inline = True

    def __init__(self, buckets: np.ndarray, weights: np.ndarray, bias: np.ndarray, n_buckets: int,
                 *, name: str = POLICY_CLASS, version: str = "0", max_tries: int = 0,
                 retry_discount: float = 0.0, feature_version: str = FEATURE_VERSION,
                 retry_prior: str = "fresh") -> None:
        if weights.shape != (len(buckets), NUM_AGENTS) or bias.shape != (NUM_AGENTS,):
            raise ManifestError(f"weights have shape {weights.shape}/{bias.shape}, "
                                f"want (k, {NUM_AGENTS})/({NUM_AGENTS},)")
        self._rows = {int(b): i for i, b in enumerate(buckets)}
        self._weights = weights.astype(np.float32)
        self._bias = bias.astype(np.float32)
        self._n_buckets = int(n_buckets)
        if feature_version not in FEATURE_VERSIONS:
            raise ManifestError(f"feature set {feature_version!r} is not computed by this version (it computes "
                                f"{', '.join(FEATURE_VERSIONS)}); retrain the fast policy")
        self.feature_version = feature_version
        self.name = name
        self.version = version
        self.max_tries = int(max_tries)  # 0: no limit (see tried_out)
        if not 0.0 <= retry_discount < 1.0:
            raise ManifestError(f"retry_discount must be in [0, 1), got {retry_discount}")
        self.retry_discount = float(retry_discount)  # 0: off (see next_ranked)
        if retry_prior not in RETRY_PRIORS:
            raise ManifestError(f"retry_prior must be one of {', '.join(RETRY_PRIORS)}, got {retry_prior!r}")
        self.retry_prior = retry_prior

    def scores(self, state: EpisodeState) -> np.ndarray:
        feats = state_features(state, self.feature_version)
        rows = [self._rows[b] for b in hash_features(feats, self._n_buckets) if b in self._rows]
        return self._bias + np.add.reduce(self._weights[rows], axis=0) if rows else self._bias.copy()

    def _decide(self, state: EpisodeState) -> Decision:
        scores = self.scores(state)
        tried_out = self.tried_out(state)
        if tried_out:
            scores = scores.copy()
            scores[tried_out] = -np.inf
        agent = int(scores.argmax())  # the method: np.argmax's dispatch costs more than the work
        if self.retry_discount and agent in state.history and not state.plan_valid:
            agent = self.next_ranked(state, tried_out)
        return Decision(agent, "model", reason=POLICY_CLASS, policy_version=self.version)

    def next_ranked(self, state: EpisodeState, excluded: Sequence[int] = ()) -> int:
        """When the model would repeat an agent already run in this episode on a still failing plan:
        the agent with the highest posterior that it addresses the present symptom. The prior is the
        model's distribution for this symptom seen afresh (the state without its agent history, which
        is what the teacher's first choices on a symptom taught it); each earlier run of an agent that
        left the plan failing multiplies its weight by `retry_discount`, the chance, measured on the
        teacher's data (`retry_discount_from`), that a chosen agent leaves the verdict unchanged. So a
        choice that keeps failing gives way to the next-ranked cause, and a dominant one is retried.
        With `retry_prior` "model" the prior is the model's own scores of the state, history included
        (what the teacher's later choices taught it), instead of the fresh symptom's."""
        prior = self.scores(dataclasses.replace(state, history=[]) if self.retry_prior == "fresh" else state)
        logp = prior - np.logaddexp.reduce(prior)
        penalty = math.log(self.retry_discount)
        for agent, runs in Counter(state.history).items():
            if 0 <= agent < NUM_AGENTS:
                logp[agent] += runs * penalty
        if excluded:
            logp[list(excluded)] = -np.inf
        return int(logp.argmax())

    def tried_out(self, state: EpisodeState) -> list[int]:
        """The repeat limit: agents already run `max_tries` times in this episode (its history, which
        a real run observes) are not chosen again, so a deterministic policy whose choice keeps
        failing moves to its next-best agent instead of repeating it until the step budget ends.
        NoOp and the rendering agent are never excluded; nor is anything when all would be."""
        if self.max_tries <= 0 or len(state.history) < self.max_tries:
            return []
        counts = Counter(state.history)
        out = [a for a, n in counts.items() if n >= self.max_tries and 0 <= a < NUM_AGENTS
               and a not in (AgentId.NOOP, AgentId.NATURAL_LANGUAGE)]
        return out if len(out) < NUM_AGENTS - 2 else []

    def decide_batch(self, states: Sequence[EpisodeState]) -> list[Decision]:
        return [self._decide(s) for s in states]  # untimed: the caller times the batch (serve/runtime.py)

    @classmethod
    def load(cls, model_dir: str | Path, manifest: Manifest | None = None) -> HashedLinearPolicy:
        model_dir = Path(model_dir)
        manifest = manifest or Manifest.load(model_dir)
        if manifest.policy_class != POLICY_CLASS:
            raise ManifestError(f"{model_dir}: policy_class {manifest.policy_class!r}, want {POLICY_CLASS!r}")
        buckets, weights, bias, n_buckets = read_weights(model_dir / WEIGHTS_FILE)
        return cls(buckets, weights, bias, n_buckets, name=manifest.name, version=manifest.version,
                   max_tries=int(manifest.extra.get("max_tries", 0)),
                   retry_discount=float(manifest.extra.get("retry_discount", 0.0)),
                   # artifacts from before the version was recorded were trained on halo-feat-3
                   feature_version=str(manifest.extra.get("feature_version", "halo-feat-3")),
                   retry_prior=str(manifest.extra.get("retry_prior", "fresh")))


def read_weights(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A fast-policy weights file: (buckets, weights[k, 21], bias[21], n_buckets); ManifestError
    when it is missing or unreadable."""
    if not path.is_file():
        raise ManifestError(f"{path}: missing (the fast policy's weights)")
    try:
        with np.load(path) as data:
            return data["buckets"], data["weights"], data["bias"], int(data["n_buckets"])
    except (KeyError, ValueError, OSError) as exc:
        raise ManifestError(f"{path}: unreadable weights: {exc}") from exc


def write_weights(path: Path, buckets: np.ndarray, weights: np.ndarray, bias: np.ndarray, n_buckets: int) -> None:
    """The fast-policy weights file `read_weights` reads."""
    np.savez_compressed(path, buckets=buckets, weights=weights, bias=bias, n_buckets=np.int64(n_buckets))


def hashed_design(rows: list[list[int]], dtype: type = np.float64) -> tuple[np.ndarray, csr_matrix]:
    """(the buckets used, a sparse 0/1 matrix: one row per example, one column per used bucket)."""
    from scipy.sparse import csr_matrix

    used = np.array(sorted({b for r in rows for b in r}), dtype=np.int64)
    col = {int(b): i for i, b in enumerate(used)}
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.array([col[b] for r in rows for b in r], dtype=np.int64)
    return used, csr_matrix((np.ones(len(indices), dtype=dtype), indices, indptr), shape=(len(rows), len(used)))


def fit_examples(train: list[Example], *, n_buckets: int = DEFAULT_BUCKETS, c: float = 0.5,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit on examples; returns (buckets, weights[k, 21], bias[21])."""
    from sklearn.linear_model import LogisticRegression

    if not train:
        raise EmptyDatasetError("no training examples: nothing passed the filter (check --filter and the runs)")
    used, x = hashed_design([hash_features(state_features(e.state), n_buckets) for e in train], np.float32)
    y = np.array([e.agent_id for e in train])
    weights = np.zeros((len(used), NUM_AGENTS), dtype=np.float32)
    bias = np.full(NUM_AGENTS, -30.0, dtype=np.float32)  # agents never seen in training are never chosen
    classes = np.unique(y)
    if len(classes) == 1:
        bias[classes[0]] = 0.0
        return used, weights, bias
    clf = LogisticRegression(C=c, max_iter=500, random_state=seed)
    clf.fit(x, y)
    coef, intercept = clf.coef_, clf.intercept_
    if len(classes) == 2:  # sklearn returns one row for a binary problem
        coef = np.vstack([-coef[0] / 2, coef[0] / 2])
        intercept = np.array([-intercept[0] / 2, intercept[0] / 2])
    for k, agent in enumerate(clf.classes_):
        weights[:, agent] = coef[k]
        bias[agent] = intercept[k]
    return used, weights, bias


def accuracy(policy: Policy, examples: list[Example]) -> float:
    if not examples:
        return float("nan")
    return sum(policy.decide(e.state).agent_id == e.agent_id for e in examples) / len(examples)


def train_fast_policy_examples(examples: list[Example], out_dir: str | Path, *, name: str = "fast",
                               data_versions: list[str] | None = None, n_buckets: int = DEFAULT_BUCKETS,
                               extra: dict | None = None) -> Manifest:
    train = [e for e in examples if e.split == "train"]
    val = [e for e in examples if e.split == "validation"]
    t0 = time.perf_counter()
    buckets, weights, bias = fit_examples(train, n_buckets=n_buckets)
    fit_s = time.perf_counter() - t0
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_weights(out / WEIGHTS_FILE, buckets, weights, bias, n_buckets)
    version = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    policy = HashedLinearPolicy(buckets, weights, bias, n_buckets, name=name, version=version,
                                max_tries=int((extra or {}).get("max_tries", 0)),
                                retry_discount=float((extra or {}).get("retry_discount", 0.0)))
    majority = Counter(e.agent_id for e in train).most_common(1)[0][0]
    metrics = {"train_examples": float(len(train)), "val_examples": float(len(val)),
               "train_accuracy": accuracy(policy, train), "fit_s": fit_s,
               "majority_agent": float(majority)}
    if val:
        metrics["val_accuracy"] = accuracy(policy, val)
        metrics["val_majority_rate"] = sum(e.agent_id == majority for e in val) / len(val)
    manifest = Manifest(name=name, version=version, policy_class=POLICY_CLASS, label_map=dict(ID_LABELS),
                        encoder_version=ENCODER_VERSION, base_model="", data_versions=list(data_versions or []),
                        metrics=metrics, created_at=time.time(),
                        extra={"feature_version": FEATURE_VERSION, "n_buckets": n_buckets,
                               "nonzero_buckets": len(buckets), **(extra or {})})
    manifest.verify()
    manifest.save(out)
    from train.train_tasks import write_train_tasks

    write_train_tasks(out, [e.task_id for e in train])
    return manifest


def train_fast_policy(episodes: list[EpisodeRecord], out_dir: str | Path, *, check: str = "validator",
                      val_fraction: float = 0.2, name: str = "fast", prefer_cheap: bool = False) -> Manifest:
    """Train straight from trajectories (filter, drop rule steps, de-duplicate, split by task)."""
    examples = select_examples(episodes, check, prefer_cheap=prefer_cheap)
    if not examples:
        raise EmptyDatasetError(f"no supervised examples in {len(episodes)} episodes with filter {check!r} "
                                "(no accepted episode, or only rule-decided steps)")
    split_by_task(examples, val_fraction)
    runs = sorted({e.run_id for e in examples})
    return train_fast_policy_examples(examples, out_dir, name=name, data_versions=runs)


def train_fast_policy_dir(data_dir: str | Path, out_dir: str | Path, *, name: str = "fast",
                          max_tries: int = 0, retry_discount: float = 0.0, retry_prior: str = "fresh") -> Manifest:
    """Train from a dataset built by `halo dataset build` (its splits and augmentations); `max_tries`
    is the policy's repeat limit (HashedLinearPolicy.tried_out; 0: none), `retry_discount` its
    move-on weight (HashedLinearPolicy.next_ranked; 0: off), both kept in its manifest."""
    from train.dataset import DatasetCard, load_examples

    card = DatasetCard.load(data_dir)
    examples = load_examples(data_dir)
    if not any(e.split == "train" for e in examples):
        raise EmptyDatasetError(f"{data_dir}: the training split is empty; nothing to train on")
    return train_fast_policy_examples(examples, out_dir, name=name,
                                      data_versions=[card.dataset_version, *card.sources],
                                      extra=_decision_settings(max_tries, retry_discount, retry_prior))


def _decision_settings(max_tries: int, retry_discount: float, retry_prior: str) -> dict | None:
    out: dict = {"max_tries": max_tries} if max_tries else {}
    if retry_discount:
        out["retry_discount"] = retry_discount
        if retry_prior != "fresh":
            out["retry_prior"] = retry_prior
    return out or None


DECISION_SETTINGS = ("max_tries", "retry_discount", "retry_prior")  # the manifest keys HashedLinearPolicy.load reads


def decision_settings(extra: dict) -> dict:
    """The decision settings a manifest's `extra` holds (a policy refitted from it keeps them)."""
    return {k: extra[k] for k in DECISION_SETTINGS if k in extra}


def retry_discount_from(episodes: Iterable[EpisodeRecord], check: str = "validator") -> float:
    """How often the teacher's chosen agent left the validator's verdict unchanged
    (train/examples.progress_step), over the model-decided steps of the accepted episodes; with one
    pseudo-count each way, clipped to [0.05, 0.95]. A wrong choice almost always leaves the verdict
    unchanged and a right one sometimes does, so this over-states a right agent's failure rate:
    the discount it gives is the cautious one."""
    from train.examples import episode_accepted, progress_step

    unchanged = total = 0
    for ep in episodes:
        if not episode_accepted(ep, check):
            continue
        for i, st in enumerate(ep.steps):
            if st.is_hardcoded or not 0 <= st.agent_id < NUM_AGENTS:
                continue
            total += 1
            unchanged += not progress_step(ep, i)
    return min(0.95, max(0.05, (unchanged + 1) / (total + 2)))

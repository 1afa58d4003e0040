"""RL from verifier reward for the fast policy (hashed linear): the update and its checkpoints.

One iteration: episodes of the current policy, sampling its agent from softmax(scores / T), in
groups of several episodes of one task with one world seed (only the policy's draws differ);
reward = oracle success (the validator's verdict where the task has no gold answer) minus a price
per LLM call; advantage = reward - the group's mean reward (optionally normalised by the group's or
the batch's spread); a REINFORCE step on the steps the model decided (rule steps are not the
policy's), plus an L2 pull towards the supervised start; optionally several steps per batch on a
PPO-style clipped ratio, an entropy bonus and a KL trust region. Episodes
that ended on an infrastructure failure (or broke) get no reward, take no part in their group's
mean, and are counted. The rollouts and the loop are in train/rl_loop.py.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from rollout.core.agent_table import NUM_AGENTS
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, is_infra_failure
from solvers.errors import InputError
from train.fast_policy import POLICY_CLASS, WEIGHTS_FILE, read_weights, write_weights
from train.features import DEFAULT_BUCKETS, hash_features, state_features
from train.manifest import Manifest

CHECKPOINT_DIR = "rl_checkpoints"
HISTORY_FILE = "rl_history.json"


class RLError(InputError, ValueError):
    pass


@dataclass
class LinearWeights:
    """The fast policy's parameters: a row of NUM_AGENTS scores per used feature bucket, and a bias."""

    buckets: np.ndarray  # int64, sorted
    weights: np.ndarray  # float64 [len(buckets), NUM_AGENTS]
    bias: np.ndarray  # float64 [NUM_AGENTS]
    n_buckets: int = DEFAULT_BUCKETS

    def __post_init__(self) -> None:
        self.weights = np.asarray(self.weights, dtype=np.float64)
        self.bias = np.asarray(self.bias, dtype=np.float64)
        self._rows = {int(b): i for i, b in enumerate(self.buckets.tolist())}

    @classmethod
    def load(cls, model_dir: str | Path) -> LinearWeights:
        model_dir = Path(model_dir)
        manifest = Manifest.load(model_dir)
        if manifest.policy_class != POLICY_CLASS:
            raise RLError(f"{model_dir}: RL fine-tunes the fast policy ({POLICY_CLASS}), "
                          f"not a {manifest.policy_class} model")
        return cls.read(model_dir / WEIGHTS_FILE)

    @classmethod
    def read(cls, path: Path) -> LinearWeights:
        buckets, weights, bias, n_buckets = read_weights(path)
        return cls(buckets.astype(np.int64), weights, bias, n_buckets)

    def save(self, path: Path, dtype: type = np.float32) -> None:
        """The artifact's format (float32); checkpoints keep float64, so a resumed run continues
        from exactly the weights it stopped at."""
        write_weights(path, self.buckets, self.weights.astype(dtype), self.bias.astype(dtype), self.n_buckets)

    def bucket_ids(self, state: EpisodeState) -> list[int]:
        return hash_features(state_features(state), self.n_buckets)

    def rows(self, bucket_ids: Iterable[int]) -> list[int]:
        return [self._rows[b] for b in bucket_ids if b in self._rows]

    def scores(self, rows: list[int]) -> np.ndarray:
        return self.bias + self.weights[rows].sum(axis=0) if rows else self.bias.copy()

    def extended(self, new_buckets: Iterable[int]) -> LinearWeights:
        """The same policy with zero rows for buckets it has no row for (they score nothing)."""
        missing = sorted(set(int(b) for b in new_buckets) - set(self._rows))
        if not missing:
            return self
        buckets = np.array(sorted(self._rows.keys() | set(missing)), dtype=np.int64)
        weights = np.zeros((len(buckets), NUM_AGENTS))
        for b, i in self._rows.items():
            weights[int(np.searchsorted(buckets, b))] = self.weights[i]
        return LinearWeights(buckets, weights, self.bias.copy(), self.n_buckets)

    def aligned_to(self, other: LinearWeights) -> np.ndarray:
        """This policy's rows on `other`'s buckets (zero where this one has none)."""
        out = np.zeros_like(other.weights)
        for i, b in enumerate(other.buckets.tolist()):
            j = self._rows.get(int(b))
            if j is not None:
                out[i] = self.weights[j]
        return out


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


class SampledLinearPolicy(Policy):
    """Draws its agent from softmax(scores / temperature) with its own random stream: the
    exploring policy of the rollouts (evaluation uses the argmax, `model:DIR`)."""

    decides_inline = True

    def __init__(self, params: LinearWeights, temperature: float, seed: int, version: str = "rl") -> None:
        self.params = params
        self.temperature = temperature
        self.rng = np.random.default_rng(seed)
        self.name = "rl-sampled"
        self.version = version

    def _decide(self, state: EpisodeState) -> Decision:
        p = softmax(self.params.scores(self.params.rows(self.params.bucket_ids(state))) / self.temperature)
        agent = int(self.rng.choice(NUM_AGENTS, p=p))
        return Decision(agent, "model", reason=f"sampled p={p[agent]:.2f}", policy_version=self.version)


@dataclass
class Scored:
    """An episode with its reward and its advantage over its group's mean."""

    record: EpisodeRecord
    group: str
    reward: float
    advantage: float = 0.0


@dataclass
class Batch:
    scored: list[Scored] = field(default_factory=list)
    infra_excluded: int = 0
    broken_excluded: int = 0


def episode_reward(record: EpisodeRecord, price_per_call: float) -> float:
    """Oracle success (validator success when the task has no gold answer) minus the calls' price."""
    success = record.success_oracle if record.success_oracle is not None else record.success_validator
    return float(bool(success)) - price_per_call * record.total_llm_calls


ADVANTAGE_NORMS = ("none", "group", "batch")


def group_advantages(episodes: list[tuple[str, EpisodeRecord]], price_per_call: float, norm: str = "none") -> Batch:
    """Rewards and group-baseline advantages of (group key, episode) pairs; infrastructure failures
    and broken episodes are left out and counted. A group with one scored episode has advantage 0.
    norm: "group" divides each group's advantages by the group's standard deviation, "batch" all
    of them by the batch's (a group whose rewards are all equal keeps advantage 0 either way)."""
    if norm not in ADVANTAGE_NORMS:
        raise RLError(f"advantage normalisation {norm!r}: one of {', '.join(ADVANTAGE_NORMS)}")
    batch = Batch()
    groups: dict[str, list[Scored]] = {}
    for key, record in episodes:
        if is_infra_failure(record):
            batch.infra_excluded += 1
        elif record.error:
            batch.broken_excluded += 1
        else:
            groups.setdefault(key, []).append(Scored(record, key, episode_reward(record, price_per_call)))
    for members in groups.values():
        rewards = np.array([s.reward for s in members])
        scale = _std_or_one(rewards - rewards.mean()) if norm == "group" else 1.0
        for s in members:
            s.advantage = float(s.reward - rewards.mean()) / scale
        batch.scored.extend(members)
    if norm == "batch":
        scale = _std_or_one(np.array([s.advantage for s in batch.scored]))
        for s in batch.scored:
            s.advantage /= scale
    return batch


def _std_or_one(centred: np.ndarray) -> float:
    std = float(np.sqrt((centred ** 2).mean())) if len(centred) else 0.0
    return std if std > 1e-9 else 1.0


def model_steps(record: EpisodeRecord) -> list[tuple[EpisodeState, int]]:
    """(state, agent) of the steps the model decided on the episode's path (not rule steps)."""
    return [(EpisodeState.from_json(s.state_json), s.agent_id) for s in record.steps
            if s.decided_by == "model" and s.on_path]


@dataclass
class PolicyStep:
    """One model decision of the batch: its feature rows, the agent drawn, the episode's advantage
    and the log-probability the sampling policy gave the agent (the ratio's denominator)."""

    rows: list[int]
    agent: int
    advantage: float
    old_logp: float
    old_logps: np.ndarray  # the sampling policy's log-probabilities of every agent (for the KL)


def batch_steps(params: LinearWeights, batch: Batch, temperature: float
                ) -> tuple[LinearWeights, list[PolicyStep]]:
    """(params extended to every bucket the batch saw, the model's steps on the episodes' paths)."""
    raw = [(s.advantage, params.bucket_ids(state), agent) for s in batch.scored
           for state, agent in model_steps(s.record)]
    params = params.extended(b for _, ids, _ in raw for b in ids)  # new rows are 0: scores unchanged
    steps = []
    for advantage, ids, agent in raw:
        rows = params.rows(ids)
        logps = log_softmax(params.scores(rows) / temperature)
        steps.append(PolicyStep(rows, agent, advantage, float(logps[agent]), logps))
    return params, steps


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max()
    return z - math.log(float(np.exp(z).sum()))


def surrogate_gradient(params: LinearWeights, steps: list[PolicyStep], n_episodes: int, temperature: float,
                       clip: float = 0.0, entropy: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(d/dW, d/db) of (1/n_episodes) x the sum over steps of min(r A, clip(r, 1 +- clip) A) plus
    entropy x H(pi(. | state)), r = pi(agent | state) / pi_old(agent | state); clip 0 means
    unclipped. At the sampling policy (r = 1) this is the REINFORCE gradient."""
    grad_w, grad_b = np.zeros_like(params.weights), np.zeros(NUM_AGENTS)
    for st in steps:
        logp = log_softmax(params.scores(st.rows) / temperature)
        p = np.exp(logp)
        g = np.zeros(NUM_AGENTS)
        ratio = math.exp(logp[st.agent] - st.old_logp)
        if st.advantage and not (clip and (ratio > 1 + clip if st.advantage > 0 else ratio < 1 - clip)):
            g = -p * (st.advantage * ratio)
            g[st.agent] += st.advantage * ratio
        if entropy:
            g -= entropy * p * (logp + float(-(p * logp).sum()))
        g /= temperature * max(n_episodes, 1)
        np.add.at(grad_w, st.rows, g)
        grad_b += g
    return grad_w, grad_b


def policy_gradient(params: LinearWeights, batch: Batch, temperature: float
                    ) -> tuple[LinearWeights, np.ndarray, np.ndarray]:
    """(params extended to every bucket the batch saw, d/dW, d/db) of the mean over scored
    episodes of advantage x sum over model steps of log pi(agent | state)."""
    params, steps = batch_steps(params, batch, temperature)
    return (params, *surrogate_gradient(params, steps, len(batch.scored), temperature))


def mean_kl(params: LinearWeights, steps: list[PolicyStep], temperature: float) -> float:
    """Mean over the batch's model steps of KL(sampling policy || params), in nats."""
    if not steps:
        return 0.0
    total = 0.0
    for st in steps:
        new = log_softmax(params.scores(st.rows) / temperature)
        total += float((np.exp(st.old_logps) * (st.old_logps - new)).sum())
    return total / len(steps)


def rl_update(params: LinearWeights, start: LinearWeights, batch: Batch, *, lr: float, pull: float,
              temperature: float, epochs: int = 1, clip: float = 0.0, entropy: float = 0.0,
              max_kl: float = 0.0) -> LinearWeights:
    """`epochs` gradient-ascent steps on the batch's clipped surrogate (see surrogate_gradient)
    minus pull/2 * ||theta - theta_start||^2 (theta: the weights and the bias). One epoch without
    clip or entropy is one REINFORCE step. max_kl > 0 is a trust region: a step that would take
    the mean KL from the sampling policy at the batch's states past it is halved until it does
    not (at most 12 times), and the epochs end there."""
    params, steps = batch_steps(params, batch, temperature)
    w0 = start.aligned_to(params)
    for _ in range(epochs):
        grad_w, grad_b = surrogate_gradient(params, steps, len(batch.scored), temperature, clip, entropy)
        step_w, step_b = grad_w - pull * (params.weights - w0), grad_b - pull * (params.bias - start.bias)
        scale = lr
        for _ in range(12):
            moved = LinearWeights(params.buckets, params.weights + scale * step_w, params.bias + scale * step_b,
                                  params.n_buckets)
            if not max_kl or mean_kl(moved, steps, temperature) <= max_kl:
                break
            scale /= 2
        else:
            return params  # no step small enough: stay
        params = moved
        if scale < lr:
            break
    return params


def batch_diagnostics(params: LinearWeights, batch: Batch, temperature: float) -> dict[str, float]:
    """Model steps per episode, the sampling policy's mean entropy (nats) at them, and the share of
    groups whose advantages are not all 0 (the groups that carry a learning signal)."""
    params, steps = batch_steps(params, batch, temperature)
    entropies = [float(-(np.exp(lp) * lp).sum()) for lp in
                 (log_softmax(params.scores(st.rows) / temperature) for st in steps)]
    groups: dict[str, bool] = {}
    for s in batch.scored:
        groups[s.group] = groups.get(s.group, False) or abs(s.advantage) > 1e-9
    return {"model_steps": len(steps) / max(len(batch.scored), 1),
            "entropy": sum(entropies) / len(entropies) if entropies else float("nan"),
            "informative_groups": sum(groups.values()) / len(groups) if groups else float("nan")}


def distance_to_start(params: LinearWeights, start: LinearWeights) -> float:
    w0 = start.aligned_to(params)
    return float(math.sqrt(((params.weights - w0) ** 2).sum() + ((params.bias - start.bias) ** 2).sum()))


@dataclass
class Checkpoint:
    """Where the run stands after `iteration` completed iterations."""

    iteration: int
    params: LinearWeights
    history: list[dict[str, float]]
    settings: dict


def save_checkpoint(out_dir: Path, ckpt: Checkpoint) -> Path:
    """Weights and history of one iteration, written whole or not at all (a temporary name, then a
    rename), so a run killed at any point resumes from the last complete iteration."""
    ckdir = out_dir / CHECKPOINT_DIR
    ckdir.mkdir(parents=True, exist_ok=True)
    stem = ckdir / f"iter-{ckpt.iteration:05d}"
    tmp = ckdir / f".tmp-{ckpt.iteration:05d}.npz"
    ckpt.params.save(tmp, dtype=np.float64)
    meta = {"iteration": ckpt.iteration, "history": ckpt.history, "settings": ckpt.settings}
    tmp_meta = ckdir / f".tmp-{ckpt.iteration:05d}.json"
    tmp_meta.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, stem.with_suffix(".npz"))
    os.replace(tmp_meta, stem.with_suffix(".json"))  # the .json last: it marks the checkpoint complete
    return stem.with_suffix(".json")


def latest_checkpoint(out_dir: Path, settings: dict) -> Checkpoint | None:
    """The newest complete checkpoint under out_dir (None: none); refuses one of other settings."""
    ckdir = out_dir / CHECKPOINT_DIR
    metas = sorted(ckdir.glob("iter-*.json")) if ckdir.is_dir() else []
    if not metas:
        return None
    meta = json.loads(metas[-1].read_text())
    before = {**ADDED_SETTINGS, **meta["settings"]}
    changed = {k for k in settings.keys() | meta["settings"].keys()
               if k not in RESUMABLE_CHANGES and settings.get(k) != before.get(k)}
    if changed:
        raise RLError(f"{out_dir}: its checkpoints were made with other settings ({', '.join(sorted(changed))}); "
                      "use another --out, or the same settings to resume")
    params = LinearWeights.read(metas[-1].with_suffix(".npz"))
    return Checkpoint(int(meta["iteration"]), params, list(meta["history"]), meta["settings"])


# Settings a resumed run may change: how long it runs and how fast it goes.
RESUMABLE_CHANGES = frozenset({"iterations", "concurrency"})
# Settings added after checkpoints were first written, with the value runs had before them.
ADDED_SETTINGS = {"exit_calls": 20}


def settings_dict(settings: object) -> dict:
    return asdict(settings)  # type: ignore[call-overload]

"""`halo train --rl`: on-policy fine-tuning of the fast policy from rollouts (the update: train/rl.py).

Each iteration draws `tasks_per_iter` training tasks, runs `group` episodes of each with one world
seed (rollout.loop.episode.run_episode, the rules layer in front of the sampling policy, in this
process's event loop), scores them, updates the policy (train.rl.rl_update) and writes a
checkpoint. A rerun with the same --out continues after the last complete iteration. The final
policy is written to --out as a fast-policy artifact (`model:DIR` loads it), with rl_history.json
and rl_curves.png.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rollout.core.trajectory import EpisodeRecord
from rollout.tasks.base import Task
from train.encoder import ENCODER_VERSION
from train.examples import Example
from train.fast_policy import ID_LABELS, POLICY_CLASS, WEIGHTS_FILE, HashedLinearPolicy, decision_settings
from train.manifest import Manifest
from train.rl import (
    ADVANTAGE_NORMS,
    HISTORY_FILE,
    Batch,
    Checkpoint,
    LinearWeights,
    RLError,
    SampledLinearPolicy,
    batch_diagnostics,
    distance_to_start,
    group_advantages,
    latest_checkpoint,
    rl_update,
    save_checkpoint,
    settings_dict,
)
from train.rl_exit import load_pool, path_examples, refit, save_pool, search_rollouts
from train.rl_fork import ForkedState, ForkingSampler, choose_states, fork_figures, fork_state, fork_update

Log = Callable[[str], object]


@dataclass
class RLSettings:
    """One RL run's settings (the `halo train --rl` options of the same names)."""

    tasks: str  # training task spec
    iterations: int = 20
    tasks_per_iter: int = 16
    group: int = 4  # episodes per task and world seed: the baseline's group
    price_per_call: float = 0.02  # reward lost per LLM call
    lr: float = 0.5
    pull: float = 0.05  # L2 pull towards the supervised start
    temperature: float = 1.0  # of the sampling softmax
    adv_norm: str = "none"  # advantage normalisation: none, group or batch (train.rl.group_advantages)
    epochs: int = 1  # gradient steps per batch (more than 1: on the clipped surrogate)
    clip: float = 0.0  # of the probability ratio, PPO-style (0: unclipped)
    entropy: float = 0.0  # entropy bonus of the sampling policy at the model's steps
    max_kl: float = 0.0  # trust region: mean KL (nats) from the sampling policy per update (0: none)
    # group: episode reward - its group's mean; fork: per state, from forks (train/rl_fork.py);
    # exit: expert iteration, the policy refitted on the search's accepted paths (train/rl_exit.py)
    advantage: str = "group"
    fork_k: int = 3  # fork: the current policy's top agents tried at a forked state (plus the sampled one)
    fork_states: int = 2  # fork: model-decided states forked per episode (a sample)
    fork_samples: int = 1  # fork: branches per tried agent (replicates beyond the first resample the world)
    exit_calls: int = 20  # exit: the search's LLM-call budget per training episode (training cost, not the policy's)
    seed: int = 0
    concurrency: int = 4
    llm: str = "sim:scale=0"  # the simulated world the episodes run in

    def check(self) -> None:
        for name in ("iterations", "tasks_per_iter", "concurrency", "epochs", "group", "fork_states",
                     "fork_samples", "exit_calls"):
            if getattr(self, name) < 1:
                raise RLError(f"--{name.replace('_', '-')} must be at least 1")
        if self.advantage not in ADVANTAGES:
            raise RLError(f"--advantage {self.advantage!r}: one of {', '.join(ADVANTAGES)}")
        if self.advantage == "group" and self.group < 2:
            raise RLError("--group must be at least 2 (the baseline is the group's mean)")
        if self.advantage == "fork":
            self._check_fork()
        if self.advantage == "exit" and (self.adv_norm != "none" or self.epochs != 1 or self.clip or self.entropy
                                         or self.max_kl):
            raise RLError("--advantage exit refits the policy on the search's paths (no gradient step): leave "
                          "--adv-norm, --rl-epochs, --clip, --entropy and --max-kl at their defaults")
        if self.temperature <= 0 or self.lr <= 0:
            raise RLError("--temperature and --lr must be > 0")
        if min(self.pull, self.price_per_call, self.clip, self.entropy, self.max_kl) < 0:
            raise RLError("--pull, --price-per-call, --clip, --entropy and --max-kl must be >= 0")
        if self.adv_norm not in ADVANTAGE_NORMS:
            raise RLError(f"--adv-norm {self.adv_norm!r}: one of {', '.join(ADVANTAGE_NORMS)}")

    def _check_fork(self) -> None:
        if self.fork_k < 1:
            raise RLError("--fork-k must be at least 1")
        if self.adv_norm != "none" or self.epochs != 1 or self.clip or self.entropy or self.max_kl:
            raise RLError("--advantage fork takes one plain step per batch: leave --adv-norm, --epochs, --clip, "
                          "--entropy and --max-kl at their defaults")


ADVANTAGES = ("group", "fork", "exit")


def _seed(*parts: object) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


async def _rollouts(tasks: list[Task], params: LinearWeights, settings: RLSettings, iteration: int,
                    forked: list[ForkedState] | None = None) -> list[tuple[str, EpisodeRecord]]:
    """`settings.group` sampled episodes per task. With `forked` (fork mode), each episode's sampled
    model states are then forked (in the episode's slot of the concurrency), their branches finished
    by the current policy's argmax, and put in `forked` in task order; an episode that ended on an
    infrastructure failure or broke is not forked."""
    from rollout.loop.episode import EpisodeConfig, run_episode
    from rollout.policies.rules import RulesFirst
    from rollout.sim.spec import sim_config_for

    sim = sim_config_for(settings.llm)
    sem = asyncio.Semaphore(settings.concurrency)
    argmax = None if forked is None else HashedLinearPolicy(params.buckets, params.weights, params.bias,
                                                            params.n_buckets, version=f"rl-{iteration}")

    async def one(task: Task, k: int) -> tuple[tuple[str, EpisodeRecord], list[ForkedState]]:
        world_seed = _seed(settings.seed, iteration, task.task_id) % 2**31
        policy = RulesFirst(SampledLinearPolicy(params, settings.temperature, _seed(world_seed, k),
                                                version=f"rl-{iteration}"))
        sampler = None if argmax is None else ForkingSampler(policy)
        config = EpisodeConfig(seed=world_seed, run_id=f"rl-{iteration}", sim=sim)
        states: list[ForkedState] = []
        async with sem:
            record = await run_episode(task, sampler or policy, config, episode_id=f"rl-{iteration}-{world_seed}-{k}")
            if sampler is not None and argmax is not None:
                states = await _fork_episode(sampler, record, argmax, settings, _seed(world_seed, k, "fork"))
        return (f"{task.task_id}|{world_seed}", record), states

    done = await asyncio.gather(*(one(t, k) for t in tasks for k in range(settings.group)))
    if forked is not None:
        forked.extend(f for _, states in done for f in states)
    return [episode for episode, _ in done]


async def _fork_episode(sampler: ForkingSampler, record: EpisodeRecord, argmax: HashedLinearPolicy,
                        settings: RLSettings, seed: int) -> list[ForkedState]:
    """The forked states of one sampled episode (none when it broke or failed on infrastructure)."""
    from rollout.policies.rules import RulesFirst

    if sampler.env is None or record.infra_error or record.error:
        return []
    finisher, out = RulesFirst(argmax), []
    for i in choose_states(len(sampler.snapshots), settings.fork_states, seed):
        snap, sampled = sampler.snapshots[i]
        assert snap.state is not None
        out.append(await fork_state(sampler.env, snap, sampled, finisher, argmax.scores(snap.state),
                                    settings.fork_k, settings.price_per_call, settings.fork_samples))
    return out


def _iteration_tasks(train: list[Task], settings: RLSettings, iteration: int) -> list[Task]:
    rng = random.Random(_seed(settings.seed, "tasks", iteration))
    return rng.sample(train, min(settings.tasks_per_iter, len(train)))


def _figures(iteration: int, batch: Batch, params: LinearWeights, start: LinearWeights, seconds: float
             ) -> dict[str, float]:
    scored = batch.scored
    n = max(len(scored), 1)
    oracle = [s.record.success_oracle for s in scored if s.record.success_oracle is not None]
    return {"iteration": float(iteration), "episodes": float(len(scored)),
            "infra_excluded": float(batch.infra_excluded), "broken_excluded": float(batch.broken_excluded),
            "mean_reward": sum(s.reward for s in scored) / n,
            "oracle_success": sum(oracle) / len(oracle) if oracle else float("nan"),
            "validator_success": sum(s.record.success_validator for s in scored) / n,
            "llm_calls": sum(s.record.total_llm_calls for s in scored) / n,
            "distance_to_start": distance_to_start(params, start), "seconds": round(seconds, 2)}


def run_rl(settings: RLSettings, init_dir: Path, out_dir: Path, log: Log = print,
           tasks: list[Task] | None = None) -> Manifest:
    """Run (or resume) the RL iterations on `tasks` (default: settings.tasks loaded); returns the
    manifest of the artifact written to out_dir."""
    from rollout.tasks.loaders import load_tasks

    settings.check()
    train = tasks if tasks is not None else load_tasks(settings.tasks)
    if not train:
        raise RLError(f"--tasks {settings.tasks!r}: no tasks")
    start = LinearWeights.load(init_dir)
    config = {**settings_dict(settings), "init_from": str(Path(init_dir).resolve()),
              "task_ids": zlib.crc32("|".join(sorted(t.task_id for t in train)).encode())}
    ckpt = latest_checkpoint(out_dir, config) or Checkpoint(0, start, [], config)
    if ckpt.iteration:
        log(f"resuming after iteration {ckpt.iteration} (from {out_dir / 'rl_checkpoints'})")
    params, history = ckpt.params, ckpt.history
    pool = load_pool(out_dir, ckpt.iteration) if settings.advantage == "exit" else []
    for iteration in range(ckpt.iteration + 1, settings.iterations + 1):
        t0 = time.perf_counter()
        tasks_now = _iteration_tasks(train, settings, iteration)
        if settings.advantage == "exit":
            params, batch, extra = _iterate_exit(params, settings, tasks_now, iteration, out_dir, pool)
        else:
            params, batch, extra = _iterate(params, start, settings, tasks_now, iteration)
        history.append({**_figures(iteration, batch, params, start, time.perf_counter() - t0), **extra})
        save_checkpoint(out_dir, Checkpoint(iteration, params, history, config))
        h = history[-1]
        log(f"iteration {iteration}/{settings.iterations}: reward {h['mean_reward']:.3f}, oracle "
            f"{h['oracle_success']:.3f}, calls {h['llm_calls']:.2f}, {int(h['episodes'])} episodes, "
            f"{int(h['infra_excluded'])} infra-excluded, {h['seconds']:.0f} s")
    start = Manifest.load(init_dir)  # its metrics (e.g. majority_agent, which `halo eval` compares with)
    return write_artifact(out_dir, params, history, config, [t.task_id for t in train], start.metrics,
                          decision_settings(start.extra))


def _iterate(params: LinearWeights, start: LinearWeights, settings: RLSettings, tasks: list[Task], iteration: int
             ) -> tuple[LinearWeights, Batch, dict[str, float]]:
    """One iteration's rollouts and update: (the updated params, the scored episodes, diagnostics)."""
    if settings.advantage == "fork":
        forked: list[ForkedState] = []
        episodes = asyncio.run(_rollouts(tasks, params, settings, iteration, forked))
        batch = group_advantages(episodes, settings.price_per_call)  # the episodes' figures; no update from them
        extra = {**batch_diagnostics(params, batch, settings.temperature), **fork_figures(forked)}
        return fork_update(params, start, forked, lr=settings.lr, pull=settings.pull,
                           temperature=settings.temperature), batch, extra
    batch = group_advantages(asyncio.run(_rollouts(tasks, params, settings, iteration)), settings.price_per_call,
                             settings.adv_norm)
    extra = batch_diagnostics(params, batch, settings.temperature)
    return rl_update(params, start, batch, lr=settings.lr, pull=settings.pull, temperature=settings.temperature,
                     epochs=settings.epochs, clip=settings.clip, entropy=settings.entropy,
                     max_kl=settings.max_kl), batch, extra


def _iterate_exit(params: LinearWeights, settings: RLSettings, tasks: list[Task], iteration: int, out_dir: Path,
                  pool: list[Example]) -> tuple[LinearWeights, Batch, dict[str, float]]:
    """One expert-iteration step: search episodes, their accepted paths into the pool (saved before
    the checkpoint), the policy refitted on the pool."""
    episodes = asyncio.run(search_rollouts(tasks, params, settings, iteration))
    examples = path_examples(episodes)
    save_pool(out_dir, iteration, examples)
    pool.extend(examples)
    batch = group_advantages(episodes, settings.price_per_call)  # the episodes' figures; no gradient from them
    return refit(pool, params), batch, {"exit_examples": float(len(examples)), "exit_pool": float(len(pool))}


def write_artifact(out_dir: Path, params: LinearWeights, history: list[dict[str, float]], config: dict,
                   task_ids: list[str], start_metrics: dict[str, float] | None = None,
                   start_settings: dict | None = None) -> Manifest:
    """The fast-policy artifact (weights.npz + manifest.json), its history and its curves; the
    start's metrics are kept beside RL's (rl_*), and its decision settings (repeat limit, move-on
    weight) go on with the weights, which RL changes and they do not."""
    import json

    from train.plot import plot_rl_curves
    from train.train_tasks import write_train_tasks

    out_dir.mkdir(parents=True, exist_ok=True)
    params.save(out_dir / WEIGHTS_FILE)
    (out_dir / HISTORY_FILE).write_text(json.dumps(history, indent=1))
    plot_rl_curves(history, out_dir / "rl_curves.png", title=f"RL from verifier reward ({config['llm']})")
    last = history[-1] if history else {}
    version = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    metrics = {**(start_metrics or {}), **{f"rl_last_{k}": float(v) for k, v in last.items() if k != "iteration"}}
    metrics["rl_iterations"] = float(len(history))
    metrics["rl_infra_excluded"] = float(sum(h["infra_excluded"] for h in history))
    manifest = Manifest(name=out_dir.name, version=version, policy_class=POLICY_CLASS, label_map=dict(ID_LABELS),
                        encoder_version=ENCODER_VERSION, data_versions=[f"rl:{config['tasks']}"], metrics=metrics,
                        created_at=time.time(),
                        extra={"n_buckets": params.n_buckets, "nonzero_buckets": int(np.count_nonzero(
                            np.abs(params.weights).sum(axis=1))), "rl": config,
                               **_feature_version(), **(start_settings or {})})
    manifest.verify()
    manifest.save(out_dir)
    write_train_tasks(out_dir, task_ids)
    return manifest


def _feature_version() -> dict[str, int | str]:
    from train.features import FEATURE_VERSION

    return {"feature_version": FEATURE_VERSION}

"""Expert iteration from the verifier (`--advantage exit`): the search as the policy's teacher.

Each iteration runs the verifier-guided search (rollout/policies/search.py, its default spec with
`exit_calls` LLM calls per episode: a stronger teacher costs training calls, never the policy's) with
the current fast policy behind the rules layer as its prior, `group` episodes per task, each on
its own world seed (the search's prior decides by argmax, so two episodes on one seed would be
the same). The search explores the prior's alternatives where its choice changed nothing and
checks a plan before accepting it; the chosen path of an episode the validator accepted is the
list of decisions that worked from each state on it (a path never holds a step that changed
nothing: such children are pruned). Those steps (the rules layer's left out) join a pool kept
over the iterations, and the policy is refitted on the pool (train/fast_policy.fit_examples):
where its own choice worked the search keeps it, and where it did not the pool holds what did.

There is no gradient step and no pull towards the start: the start enters through the prior,
whose choices make most of every path. Rewards are reported as in the other modes (oracle success
minus the price per call of the search episode, whose calls are the training's cost); episodes
that failed on infrastructure or broke are left out of the pool and counted. The pool is written
beside the checkpoints (one file per iteration), so a resumed run refits on what it had.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from pathlib import Path
from typing import Protocol

from rollout.core.trajectory import EpisodeRecord, is_infra_failure
from rollout.tasks.base import Task
from train.examples import Example, select_examples
from train.fast_policy import HashedLinearPolicy, fit_examples
from train.rl import CHECKPOINT_DIR, LinearWeights

POOL_FILE = "exit-pool-{:05d}.jsonl"


class RolloutSettings(Protocol):
    """What the search rollouts read of the run's settings (train.rl_loop.RLSettings)."""

    llm: str
    concurrency: int
    seed: int
    group: int
    exit_calls: int


def _world_seed(seed: int, iteration: int, task_id: str, k: int) -> int:
    return zlib.crc32(f"{seed}|exit|{iteration}|{task_id}|{k}".encode()) % 2**31


async def search_rollouts(tasks: list[Task], params: LinearWeights, settings: RolloutSettings, iteration: int
                          ) -> list[tuple[str, EpisodeRecord]]:
    """`group` search episodes per task with the current policy (argmax, rules first) as the prior."""
    from rollout.loop.episode import EpisodeConfig, run_episode
    from rollout.policies.rules import RulesFirst
    from rollout.policies.search import SearchPolicy, SearchSpec
    from rollout.sim.spec import sim_config_for

    sim = sim_config_for(settings.llm)
    sem = asyncio.Semaphore(settings.concurrency)
    # one policy for the iteration's episodes: neither it nor its prior keeps state between episodes
    prior = RulesFirst(HashedLinearPolicy(params.buckets, params.weights, params.bias, params.n_buckets,
                                          version=f"exit-{iteration}"))
    policy = SearchPolicy(SearchSpec(max_calls=settings.exit_calls), prior)

    async def one(task: Task, k: int) -> tuple[str, EpisodeRecord]:
        world_seed = _world_seed(settings.seed, iteration, task.task_id, k)
        config = EpisodeConfig(seed=world_seed, run_id=f"exit-{iteration}", sim=sim)
        async with sem:
            record = await run_episode(task, policy, config, episode_id=f"exit-{iteration}-{world_seed}")
        return task.task_id, record

    return list(await asyncio.gather(*(one(t, k) for t in tasks for k in range(settings.group))))


def path_examples(episodes: list[tuple[str, EpisodeRecord]]) -> list[Example]:
    """The chosen paths' non-rule steps of the validator-accepted episodes (infra failures and
    broken episodes left out)."""
    kept = [r for _, r in episodes if not is_infra_failure(r) and not r.error]
    return select_examples(kept, "validator")


def save_pool(out_dir: Path, iteration: int, examples: list[Example]) -> None:
    """One iteration's examples, written whole (a temporary name, then a rename) before its checkpoint."""
    ckdir = out_dir / CHECKPOINT_DIR
    ckdir.mkdir(parents=True, exist_ok=True)
    path = ckdir / POOL_FILE.format(iteration)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(e.__dict__) + "\n" for e in examples))
    tmp.replace(path)


def load_pool(out_dir: Path, through: int) -> list[Example]:
    """The examples of iterations 1..through (a resumed run's pool)."""
    out: list[Example] = []
    for iteration in range(1, through + 1):
        path = out_dir / CHECKPOINT_DIR / POOL_FILE.format(iteration)
        if path.is_file():
            out += [Example(**json.loads(line)) for line in path.read_text().splitlines() if line]
    return out


def refit(pool: list[Example], current: LinearWeights) -> LinearWeights:
    """The policy fitted on the pool (the current one while the pool is empty)."""
    if not pool:
        return current
    buckets, weights, bias = fit_examples(pool, n_buckets=current.n_buckets)
    return LinearWeights(buckets.astype("int64"), weights, bias, current.n_buckets)

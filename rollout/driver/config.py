"""What a rollout job is asked to run: `RolloutConfig`, and the arguments that name a run
(`IDENTITY_KEYS`: the same ones resume it, other ones are refused under the same run ID)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollout.driver.worker import EpisodeFn

IDENTITY_KEYS = ("tasks", "policy", "llm", "seed", "max_steps")


@dataclass
class RolloutConfig:
    store_url: str = "./halo-data"
    tasks: str = "planbench:all"
    policy: str = "rules+scripted"
    llm: str = "sim"
    episodes: int = 200
    replicas: int | None = None  # default: the cluster's CPUs // cpus_per_worker
    cpus_per_worker: int = 1
    # Each worker runs on CPUs of its own (claimed machine-wide; unpinned when none are free).
    pin_cpus: bool = True
    run_id: str | None = None  # default: derived from the arguments, so the same command resumes
    seed: int = 0
    max_steps: int = 10
    max_attempts: int = 3  # crashes of one task before it is quarantined
    # A resumed run keeps the tasks an earlier session quarantined out (their episodes would
    # crash workers again); True gives them a fresh set of attempts.
    retry_quarantined: bool = False
    # Episodes in flight per worker at start (default 8 x its CPUs: two batches of 4, so Ray's
    # per-call cost is shared by 4 episodes; AIMD moves it from there).
    initial_window: int | None = None
    max_window: int = 10_000  # slow start grows windows as far as CPUs and the LLM budget allow
    # Episodes per submit call. None: half the worker's window, at most MAX_AUTO_BATCH (more for
    # large windows), so Ray's per-call cost is shared; episodes come back one by one as they finish.
    episodes_per_call: int | None = None
    backup_tail: bool = True  # idle workers re-run the last episodes still in flight elsewhere
    max_backups_per_call: int = 2
    storage_options: dict[str, str] | None = None
    store_retry_budget_s: float = 60.0
    commit_max_age_s: float = 2.0
    solver_timeout_s: float | None = None
    max_worker_restarts: int | None = None  # default: 4 x replicas + 4
    progress: bool = True
    code_version: str = ""
    episode_fn: EpisodeFn | None = None  # a different episode function (benchmarks, fault tests)
    # The LLM budget of the whole job, across all workers on all nodes (rollout/llm/budget.py).
    llm_rpm: float | None = None
    llm_tpm: float | None = None
    llm_concurrency: int | None = None
    llm_pool: int = 512  # connections of each worker's one LLM client (bounded by llm_concurrency)
    status_interval_s: float = 0.5  # how often the driver reads each worker's counters

    def __post_init__(self) -> None:
        from rollout.sim.spec import absolute_world_spec

        # workers may start in another directory: a sim world file is named by its absolute path
        self.llm = absolute_world_spec(self.llm)

    def identity(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "policy": self.policy, "llm": self.llm, "seed": self.seed,
                "max_steps": self.max_steps}

"""What a rollout session did: `RolloutSummary`, returned by `RolloutJob.run` and printed by `halo rollout`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollout.store import QuarantinedTask


@dataclass
class RolloutSummary:
    run_id: str
    status: str  # completed | interrupted | failed
    store_url: str
    requested: int
    resumed: int  # already committed before this session
    committed: int  # newly committed in this session
    succeeded: int  # validator-accepted among the episodes finished in this session
    dropped: int
    quarantined: list[QuarantinedTask]
    errors: dict[str, int]
    wall_s: float
    startup_s: float  # starting the workers (until each answered once)
    run_s: float  # from dispatching the first episode to the last commit
    workers: int
    cpus_used: int
    solver_cpu_s: float
    worker_cpu_s: float  # CPU time of the worker process trees (episodes, sim agents, policy, solvers)
    peak_rss_mb: float
    worker_restarts: int
    retries: int
    backups: int  # tail copies started (each one costs an episode's CPU when it loses)
    commits: int
    commit_s: float
    rows_committed: int
    message: str = ""
    max_in_flight: int = 0  # the most episodes in flight at once, all workers
    llm_429: int = 0  # rate-limited answers the workers saw
    budget: dict[str, Any] = field(default_factory=dict)  # the budget coordinator's counters
    solver_cache: dict[str, float] = field(default_factory=dict)  # hits/misses summed over the workers
    worker_cpus: dict[int, tuple[int, ...]] = field(default_factory=dict)  # worker PID -> CPUs it ran pinned to
    infra_failures: int = 0  # episodes that failed on infrastructure (not committed; a resume redoes them)
    top_failures: list[tuple[str, int]] = field(default_factory=list)  # the most common failure reasons

    @property
    def solver_cache_hit_rate(self) -> float:
        asked = self.solver_cache.get("hits", 0) + self.solver_cache.get("misses", 0)
        return self.solver_cache.get("hits", 0) / asked if asked else 0.0

    @property
    def episodes_per_s(self) -> float:
        return self.committed / self.wall_s if self.wall_s > 0 else 0.0


def top_failure_reasons(errors: dict[str, int], n: int = 3) -> list[tuple[str, int]]:
    """The `n` most common reasons episodes did not succeed (unsolved:<category>, infra:<kind>, ...)."""
    return sorted(((k, v) for k, v in errors.items() if v), key=lambda kv: (-kv[1], kv[0]))[:n]

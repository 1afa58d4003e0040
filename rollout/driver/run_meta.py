"""The run's metadata in the store across a session: opened as "running" (refusing a run ID
that exists with other arguments), refreshed while it runs, closed with the session's outcome.
Re-running the same arguments under the same run ID resumes the run."""

from __future__ import annotations

import contextlib
import logging

from rollout.driver.config import IDENTITY_KEYS, RolloutConfig
from rollout.driver.progress import ProgressStats
from rollout.driver.summary import RolloutSummary
from rollout.llm.spec import LLMSpec
from rollout.store import RunMeta, StoreUnavailable, TrajectoryStore

log = logging.getLogger(__name__)


def same_identity(meta: RunMeta, config: RolloutConfig) -> bool:
    identity = config.identity()
    return {k: meta.config.get(k) for k in IDENTITY_KEYS} == identity


def open_run(store: TrajectoryStore, run_id: str, config: RolloutConfig, episodes_requested: int) -> RunMeta:
    meta = store.read_run_meta(run_id)
    identity = config.identity()
    if meta is not None:
        before = {k: meta.config.get(k) for k in IDENTITY_KEYS}
        if before != identity:
            diff = ", ".join(f"{k}: {before[k]!r} -> {identity[k]!r}" for k in IDENTITY_KEYS
                             if before[k] != identity[k])
            raise ValueError(f"run {run_id} already exists in {store.url} with other arguments "
                             f"({diff}); use another --run-id, or the same arguments to resume it")
    else:
        meta = RunMeta(run_id)
    meta.status = "running"
    meta.config = {**identity, "episodes": config.episodes, "store": store.url,
                   "replicas": config.replicas, "cpus_per_worker": config.cpus_per_worker}
    llm = LLMSpec.parse(config.llm)
    meta.llm_backend = llm.backend
    if llm.is_sim:  # the world the episodes ran in, by its parameters' hash
        from rollout.sim.spec import SimSpec

        sim = SimSpec.parse(llm).config
        meta.config["sim_world"] = {"name": sim.world_name, "hash": sim.world_hash}
    meta.policy = config.policy
    meta.episodes_requested = episodes_requested
    meta.message = ""
    store.write_run_meta(meta)
    return meta


def record_progress(store: TrajectoryStore, meta: RunMeta, stats: ProgressStats) -> None:
    meta.episodes_committed = stats.resumed + stats.committed
    meta.errors = dict(stats.errors)
    with contextlib.suppress(StoreUnavailable):  # the committer reports outages; this is best effort
        store.write_run_meta(meta)


def close_run(store: TrajectoryStore, meta: RunMeta, summary: RolloutSummary) -> None:
    meta.status = summary.status
    meta.message = summary.message
    meta.episodes_committed = summary.resumed + summary.committed
    meta.episodes_failed = summary.dropped
    meta.quarantined = summary.quarantined
    meta.errors = summary.errors
    try:
        store.write_run_meta(meta)
    except StoreUnavailable as exc:
        log.error("could not record the run's final status: %s", exc)

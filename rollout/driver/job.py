"""The rollout job: a pool of Ray actors runs episodes; one committer lands them in the store.

This module is the driver's loop; each concern it ties together has its own module:
`config.py` (what to run), `actors.py` (the workers' life cycle), `scheduling.py` (queues,
batches, tail backups), `quarantine.py` (strikes), `run_meta.py` (the run's metadata) and
`summary.py` (what a session did).

Fault handling:
- an actor that dies (SIGKILL, OOM, a segfaulting solver) has its in-flight episodes re-queued
  as *suspects*; a suspect runs alone on a worker, so a death during it is attributed exactly;
- a task whose episodes kill their worker or raise `max_attempts` times is quarantined: its
  remaining episodes are dropped, its last error recorded in the run metadata, the job goes on;
- a storage outage past the store's retry budget stops the job (status "failed"); committed
  episodes stay, and re-running the same run ID resumes (committed episode IDs are skipped);
- Ctrl-C stops dispatching, commits what finished, marks the run "interrupted".

Tail backups: once nothing is left to dispatch, a worker with nothing in flight gets copies of
episodes still running elsewhere (the newest first); whichever copy finishes first is kept and
the other is discarded, so the job's end is not held by the last episodes queued on one worker.
Episode IDs make this safe: the driver keeps one result per ID, and the store would ignore a
second anyway. A backup costs CPU (and, against a paid LLM endpoint, tokens): `backup_tail=False`
turns it off.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rollout.core.infra import short_reason
from rollout.driver.actors import Slot, WorkerPool
from rollout.driver.committer import Committer
from rollout.driver.config import RolloutConfig
from rollout.driver.episode_set import EpisodeSpec, default_run_id, plan_episodes
from rollout.driver.infra_failures import InfraTally, default_limit
from rollout.driver.progress import ProgressDisplay, ProgressStats
from rollout.driver.quarantine import Quarantine, Strike
from rollout.driver.run_meta import close_run, open_run, record_progress, same_identity
from rollout.driver.scheduling import Dispatcher, Schedule
from rollout.driver.summary import RolloutSummary, top_failure_reasons
from rollout.driver.worker import EpisodeSummary, WorkerBatch
from rollout.store import RetryPolicy, RunMeta, StoreUnavailable, TrajectoryStore, check_run_id
from rollout.store.lease import Lease, LeaseInfo, run_lease_path, run_stop_path

log = logging.getLogger(__name__)

MAX_UNCOMMITTED = 5_000  # finished episodes waiting for the committer before dispatch pauses


class RolloutJob:
    def __init__(self, config: RolloutConfig, *, store: TrajectoryStore | None = None) -> None:
        from rollout.policies import make_policy
        from rollout.sim.runnable import sim_unrunnable
        from rollout.sim.spec import read_llm_spec
        from rollout.tasks import load_tasks

        self.config = config
        llm = read_llm_spec(config.llm)
        make_policy(config.policy, seed=config.seed).close()  # a bad spec fails here, not in every actor
        if config.cpus_per_worker < 1:
            raise ValueError(f"cpus_per_worker must be at least 1, got {config.cpus_per_worker}")
        if config.replicas is not None and config.replicas < 1:
            raise ValueError(f"--replicas must be at least 1, got {config.replicas}")
        self.tasks = load_tasks(config.tasks)
        if llm.is_sim and (unrunnable := sim_unrunnable(self.tasks)) is not None:
            raise ValueError(unrunnable)  # e.g. Natural Plan's own files: no PDDL to draft from
        self.run_id = check_run_id(config.run_id or default_run_id(config.identity()))
        self.specs = plan_episodes(self.tasks, config.episodes, self.run_id, config.seed)
        self.store = store or TrajectoryStore(config.store_url, storage_options=config.storage_options,
                                              retry=RetryPolicy(budget_s=config.store_retry_budget_s))
        self.stats = ProgressStats(total=len(self.specs), llm_rpm_limit=config.llm_rpm, llm_tpm_limit=config.llm_tpm,
                                   llm_concurrency_limit=config.llm_concurrency)
        self.pool = WorkerPool(config)
        self.quarantine = Quarantine(config.max_attempts)
        self.infra = InfraTally(config.max_infra_failures or default_limit(len(self.specs)))
        self.peak_rss_mb = 0.0
        self.solver_cpu_s = 0.0
        self._worker_cpu: dict[int, float] = {}  # pid -> CPU seconds of its process tree, last seen
        self._solver_cache: dict[int, dict] = {}  # pid -> its solvers.cache_stats(), last seen
        self._worker_cpus: dict[int, tuple[int, ...]] = {}  # pid -> the CPUs it is pinned to (empty: unpinned)
        self._task_steps: dict[str, tuple[int, int]] = {}  # task ID -> (episodes, steps) accepted
        self._steps_seen = (0, 0)
        self._t_dispatch = self._t_end = 0.0
        self._stop_checked = 0.0
        self.lease: Lease | None = None

    @property
    def slots(self) -> list[Slot]:
        return self.pool.slots

    # ---- public --------------------------------------------------------------------------

    def run(self) -> RolloutSummary:
        """Run the job under the run's lease: a second writer of the same run is refused
        (LeaseHeld) before it writes anything."""
        t0 = time.monotonic()
        self.lease = Lease(self.store, run_lease_path(self.run_id), what=f"run {self.run_id}",
                           ttl_s=self.config.lease_ttl_s)
        previous = self.lease.acquire(confirm_s=self.config.lease_confirm_s)
        self.lease.start_heartbeat()
        try:
            return self._run_leased(t0, previous)
        finally:
            try:
                self.lease.release()
            except StoreUnavailable:  # a store outage: the lease expires by itself (its TTL)
                log.warning("could not release the lease of run %s; it expires in %.0fs", self.run_id,
                            self.lease.ttl_s)

    def _run_leased(self, t0: float, previous: LeaseInfo | None) -> RolloutSummary:
        existing = self.asks_fewer_than_stored()
        if existing is not None:
            return self._fewer_than_stored(existing, t0)
        meta = open_run(self.store, self.run_id, self.config, len(self.specs))
        committed = self.store.episode_ids(self.run_id)
        # Only files from before the previous holder's last heartbeat (or from before this lease,
        # when the previous one was released): a file newer than that may be another writer's.
        cutoff = previous.at if previous is not None and previous.owner else self.lease.acquired_at
        self.store.remove_orphans(self.run_id, older_than=cutoff)
        todo = [s for s in self.specs if s.episode_id not in committed]
        self.stats.resumed = len(self.specs) - len(todo)
        if not self.config.retry_quarantined:
            todo = self._keep_quarantine(meta, todo)
        schedule = Schedule(pending=deque(todo))
        dispatcher = Dispatcher(schedule, skip=self._skip, episodes_per_call=self.config.episodes_per_call,
                                backup_tail=self.config.backup_tail,
                                max_backups_per_call=self.config.max_backups_per_call,
                                expected=self._expected_steps)
        committer = Committer(self.store, self.run_id, max_age_s=self.config.commit_max_age_s).start()
        status, message = "completed", ""
        display = ProgressDisplay(self.stats, f"halo rollout {self.run_id}", enabled=self.config.progress)
        try:
            with display:
                if todo:
                    self.pool.start(len(todo), self.run_id, self.tasks)
                    self.stats.workers = len(self.pool.slots)
                    self.stats.started = self._t_dispatch = time.monotonic()
                    status, message = self._loop(meta, dispatcher, committer, display)
        except KeyboardInterrupt:
            status, message = "interrupted", "stopped by Ctrl-C or SIGTERM; re-run the same command to resume"
        finally:
            self.pool.stop()
            committer.close()
            self.stats.committed = committer.committed
            self._t_end = time.monotonic()
        if committer.failure is not None:
            status = "failed"
            message = str(committer.failure)
        elif self.infra.given_up and status == "completed":  # episodes left out: the run is not complete
            status, message = "failed", self.infra.reason()
        summary = self._summary(committer, status, message, time.monotonic() - t0, dispatcher.backups)
        close_run(self.store, meta, summary)
        return summary

    def asks_fewer_than_stored(self) -> RunMeta | None:
        """The run's metadata when it exists with these arguments and asked for more episodes than
        this job does (`--episodes 50` after a 200-episode run): then there is nothing to do."""
        existing = self.store.read_run_meta(self.run_id)
        if (existing is not None and existing.episodes_requested > len(self.specs)
                and same_identity(existing, self.config)):
            return existing
        return None

    def fewer_message(self, meta: RunMeta) -> str:
        stored = len(self.store.episode_ids(self.run_id))
        return (f"run {self.run_id} already holds {stored} of its {meta.episodes_requested} requested episodes; "
                f"--episodes {len(self.specs)} asks for fewer: nothing was run or recorded "
                f"(pass --episodes {meta.episodes_requested} or more to resume or extend it)")

    def _fewer_than_stored(self, meta: RunMeta, t0: float) -> RolloutSummary:
        """--episodes below what the run asked for before: nothing to run, the record stays as it is."""
        message = self.fewer_message(meta)
        self.stats.resumed = len(self.specs)
        return self._summary(Committer(self.store, self.run_id), "completed", message, time.monotonic() - t0, 0)

    def _stop_reason(self) -> tuple[str, str] | None:
        """A stop asked with `halo runs stop` (checked every 2 s), or the lease lost to another writer."""
        if self.lease.lost:
            return "failed", f"lost the run's lease: {self.lease.lost}"
        now = time.monotonic()
        if now - self._stop_checked < 2.0:
            return None
        self._stop_checked = now
        try:
            raw = self.store.get_bytes(run_stop_path(self.run_id))
        except StoreUnavailable:  # an outage: the committer reports it and stops the job
            return None
        if raw and _stop_time(raw) >= self.lease.acquired_at:
            return "interrupted", "stopped by `halo runs stop`; re-run the same command to resume"
        return None

    def worker_pids(self) -> list[int]:
        return self.pool.pids()

    # ---- the loop ------------------------------------------------------------------------

    def _loop(self, meta: RunMeta, dispatcher: Dispatcher, committer: Committer,
              display: ProgressDisplay) -> tuple[str, str]:
        import ray

        state = dispatcher.schedule
        last_meta = time.monotonic()
        while state.pending or state.suspects or state.unfinished(self.pool.slots):
            if committer.failure is not None:
                return "failed", str(committer.failure)
            if self.pool.stop_reason:
                return "failed", self.pool.stop_reason
            if self.infra.over_limit:
                return "failed", self.infra.reason()
            stop = self._stop_reason()
            if stop:
                return stop
            self.pool.poll(self.stats, lambda slot: self._worker_died(slot, state))
            if committer.pending < MAX_UNCOMMITTED:  # backpressure: let a slow store catch up
                dispatcher.dispatch(self.pool.slots)
            streams = {slot.results: slot for slot in self.pool.live() if slot.results is not None}
            waitables = [*streams, *state.submits]
            if not waitables:
                time.sleep(0.05)
                continue
            ready, rest = ray.wait(waitables, num_returns=1, timeout=0.25)
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                if ref in state.submits:
                    self._submitted(ref, state)
                elif ref in streams and not streams[ref].dead:
                    self._collect(streams[ref], state, committer)
            live = self.pool.live()
            self.stats.in_flight = sum(s.in_flight for s in live)
            self.stats.window = sum(s.window.size for s in live)
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
            self.stats.committed = committer.committed
            display.refresh()
            if time.monotonic() - last_meta > 15:
                last_meta = time.monotonic()
                record_progress(self.store, meta, self.stats)
        return "completed", ""

    def _submitted(self, ref: Any, state: Schedule) -> None:
        """A submit call answered: nothing to do, unless it failed."""
        import ray
        from ray.exceptions import RayTaskError

        specs, slot = state.submits.pop(ref)
        try:
            ray.get(ref)
        except RayTaskError as exc:  # the worker refused the batch: its episodes never started
            for spec in state.reported(slot, [spec.episode_id for spec in specs]):
                if not state.settled(spec):
                    self._strike(spec, f"worker call failed: {exc}"[-3000:], requeue=state.pending)
        except ray.exceptions.RayError:
            self._worker_died(slot, state)

    def _collect(self, slot: Slot, state: Schedule, committer: Committer) -> None:
        """The next chunk of a worker's results stream (it is ready: this does not block)."""
        import ray

        try:
            batch: WorkerBatch = ray.get(next(slot.results))
        except (StopIteration, ray.exceptions.RayError) as exc:
            # The worker died, or its results stream broke (then it cannot report any more
            # episodes): either way its episodes in flight are lost with it.
            if not isinstance(exc, ray.exceptions.RayActorError):
                log.warning("worker %d: results stream ended (%s); replacing the worker", slot.index,
                            type(exc).__name__)
            self._worker_died(slot, state)
            return
        state.reported(slot, [outcome.spec.episode_id for outcome in batch.outcomes])
        self.peak_rss_mb = max(self.peak_rss_mb, batch.peak_rss_mb)
        self._worker_cpu[batch.worker_pid] = max(self._worker_cpu.get(batch.worker_pid, 0.0), batch.cpu_s)
        self._solver_cache[batch.worker_pid] = batch.extra.get("solver_cache") or {}
        self._worker_cpus[batch.worker_pid] = tuple(batch.extra.get("pinned_cpus") or ())
        accepted: list[EpisodeSummary] = []
        discarded = False
        for outcome in batch.outcomes:
            summary = outcome.summary
            if outcome.spec.episode_id in state.done:  # the other copy of a tail backup won
                discarded = True
                continue
            if summary is not None and summary.infra_error:  # not an outcome: never committed
                discarded = True
                self._infra_failed(slot, outcome.spec, summary.infra_error, state)
                continue
            if summary is None or summary.num_steps == 0:  # raised, or ended on an error before any step
                if state.settled(outcome.spec):  # its other copy is still running: let it decide
                    continue
                kind = "episode_exception" if summary is None else "episode_error"
                self.stats.errors[kind] += 1
                slot.window.on_result(ok=False)
                self._strike(outcome.spec, outcome.error if summary is None else summary.error,
                             requeue=state.pending)
                continue
            slot.window.on_result(ok=not summary.error, llm_latency_ms=outcome.llm_latency_ms,
                                  solver_wait_s=batch.solver_wait_s, solver_run_s=batch.solver_run_s)
            accepted.append(summary)
            state.done.add(summary.episode_id)
        rows = batch.rows
        if accepted and rows is not None:
            if discarded:
                keep = pa.array([a.episode_id for a in accepted], pa.string())
                rows = rows.filter(pc.is_in(rows.column("episode_id"), value_set=keep))
            self._accept(accepted, rows, committer)

    def _accept(self, records: list[EpisodeSummary], rows: pa.Table, committer: Committer) -> None:
        """`rows` holds the step rows of exactly these episodes."""
        if not committer.submit(rows, episodes=len(records)):
            return
        s = self.stats
        for record in records:
            s.done += 1
            s.succeeded += bool(record.success_validator)
            if record.success_oracle is not None:
                s.oracle_graded += 1
                s.oracle_ok += bool(record.success_oracle)
            if record.error:
                s.errors["episode_error"] += 1
            elif not record.success_validator:
                s.errors[f"unsolved:{record.last_error_category or 'budget'}"] += 1
            self.solver_cpu_s += record.solver_cpu_s
            n, total = self._task_steps.get(record.task_id, (0, 0))
            self._task_steps[record.task_id] = (n + 1, total + record.num_steps)
            self._steps_seen = (self._steps_seen[0] + 1, self._steps_seen[1] + record.num_steps)

    def _infra_failed(self, slot: Slot, spec: EpisodeSpec, infra_error: str, state: Schedule) -> None:
        """A dependency failed during the episode: count it, run it again or leave it for the next resume."""
        if state.settled(spec):  # its other copy is still running: let it decide
            return
        self.stats.errors[f"infra:{short_reason(infra_error)}"] += 1
        slot.window.on_result(ok=False)
        if self.infra.record(spec.episode_id, infra_error):
            self.stats.retries += 1
            state.pending.append(spec)
        else:
            self.stats.dropped += 1

    def _expected_steps(self, spec: EpisodeSpec) -> float:
        """The mean steps of the task's episodes accepted so far (of all episodes, for a task not
        seen yet): the dispatcher's guess at how long the episode runs."""
        n, total = self._task_steps.get(spec.task_id) or self._steps_seen
        return total / n if n else 0.0

    def _worker_died(self, slot: Slot, state: Schedule) -> None:
        if not self.pool.retire(slot):
            return
        self.stats.errors["worker_died"] += 1
        lost = state.lost_with(slot)
        alone = len(lost) == 1  # it ran alone: the death is this episode's doing
        for spec in lost:
            if state.settled(spec):  # a tail backup whose other copy is done or still running
                continue
            if alone:
                self._strike(spec, "the worker process died while running this episode "
                                   "(killed, out of memory, or crashed)", requeue=state.suspects)
            else:
                self.stats.retries += 1
                state.suspects.append(spec)
        self.pool.replace(slot)

    # ---- strikes and quarantine ----------------------------------------------------------

    def _strike(self, spec: EpisodeSpec, error: str, *, requeue: deque[EpisodeSpec]) -> None:
        verdict = self.quarantine.strike(spec.task_id, error)
        if verdict is Strike.RETRY:
            self.stats.retries += 1
            requeue.append(spec)
            return
        if verdict is Strike.QUARANTINED:
            self.stats.quarantined_tasks += 1
        self.stats.dropped += 1

    def _skip(self, spec: EpisodeSpec) -> bool:
        """Drop an episode whose task is quarantined (at dispatch)."""
        if self.quarantine.holds(spec.task_id):
            self.stats.dropped += 1
            return True
        return False

    def _keep_quarantine(self, meta: RunMeta, todo: list[EpisodeSpec]) -> list[EpisodeSpec]:
        """Tasks quarantined by an earlier session of this run stay out; their episodes are dropped."""
        if not meta.quarantined:
            return todo
        self.quarantine.restore(meta.quarantined)
        kept = [s for s in todo if not self.quarantine.holds(s.task_id)]
        self.stats.dropped += len(todo) - len(kept)
        log.warning("resuming run %s without %d quarantined task(s) (%d episodes); --retry-quarantined "
                    "runs them again", self.run_id, len(meta.quarantined), len(todo) - len(kept))
        return kept

    # ---- the session's summary -----------------------------------------------------------

    def _summary(self, committer: Committer, status: str, message: str, wall_s: float,
                 backups: int) -> RolloutSummary:
        pool = self.pool
        return RolloutSummary(
            run_id=self.run_id, status=status, store_url=self.store.url, requested=len(self.specs),
            resumed=self.stats.resumed, committed=committer.committed, succeeded=self.stats.succeeded,
            dropped=self.stats.dropped, quarantined=self.quarantine.tasks(), errors=dict(self.stats.errors),
            wall_s=wall_s, startup_s=pool.startup_s,
            run_s=max(0.0, self._t_end - self._t_dispatch) if self._t_dispatch else 0.0,
            workers=len(pool.slots), cpus_used=len(pool.slots) * self.config.cpus_per_worker,
            solver_cpu_s=self.solver_cpu_s, worker_cpu_s=sum(self._worker_cpu.values()),
            peak_rss_mb=self.peak_rss_mb, worker_restarts=pool.restarts,
            retries=self.stats.retries, backups=backups, commits=committer.commits, commit_s=committer.commit_s,
            rows_committed=committer.rows, message=message,
            solver_cache={k: sum(c.get(k, 0) for c in self._solver_cache.values()) for k in ("hits", "misses")},
            max_in_flight=self.stats.max_in_flight, llm_429=self.stats.llm_429, budget=dict(pool.budget_stats),
            worker_cpus=dict(self._worker_cpus), infra_failures=self.infra.failures,
            top_failures=top_failure_reasons(self.stats.errors),
        )


def _stop_time(raw: bytes) -> float:
    import json

    try:
        return float(json.loads(raw).get("at", 0.0))
    except (ValueError, AttributeError, TypeError):
        return 0.0


def run_rollout(config: RolloutConfig, *, store: TrajectoryStore | None = None) -> RolloutSummary:
    return RolloutJob(config, store=store).run()

"""The rollout job: a pool of Ray actors runs episodes; one committer lands them in the store.

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

import contextlib
import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rollout.driver.aimd import AIMDWindow
from rollout.driver.committer import Committer
from rollout.driver.plan import EpisodeSpec, default_run_id, plan_episodes
from rollout.driver.progress import ProgressDisplay, ProgressStats
from rollout.driver.worker import (
    EpisodeFn,
    EpisodeSummary,
    RolloutWorker,
    WorkerBatch,
    WorkerSetup,
    parse_llm_spec,
)
from rollout.store import QuarantinedTask, RetryPolicy, RunMeta, StoreUnavailable, TrajectoryStore, check_run_id

log = logging.getLogger(__name__)

IDENTITY_KEYS = ("tasks", "policy", "llm", "seed", "max_steps")
MAX_UNCOMMITTED = 5_000  # finished episodes waiting for the committer before dispatch pauses
MAX_AUTO_BATCH = 4  # the most episodes per Ray call when episodes_per_call is not set, up to a window of 128
MAX_BIG_BATCH = 64  # ... for larger windows: a thirty-second of the window, so calls in flight stay ~32


@dataclass
class RolloutConfig:
    store_url: str = "./halo-data"
    tasks: str = "planbench:all"
    policy: str = "rules+scripted"
    llm: str = "sim"
    episodes: int = 200
    replicas: int | None = None  # default: the cluster's CPUs // cpus_per_worker
    cpus_per_worker: int = 1
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
    # Episodes per Ray call. None: half the worker's window, at most MAX_AUTO_BATCH, so each worker
    # still has two calls in flight and one slow episode does not hold back the rest.
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

    def identity(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "policy": self.policy, "llm": self.llm, "seed": self.seed,
                "max_steps": self.max_steps}


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

    @property
    def solver_cache_hit_rate(self) -> float:
        asked = self.solver_cache.get("hits", 0) + self.solver_cache.get("misses", 0)
        return self.solver_cache.get("hits", 0) / asked if asked else 0.0

    @property
    def episodes_per_s(self) -> float:
        return self.committed / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class _Slot:
    index: int
    actor: Any
    window: AIMDWindow
    in_flight: int = 0
    solo: bool = False  # running one suspect episode alone
    dead: bool = False
    ready: bool = False  # answered once (a replacement may wait for a node with a free CPU)
    ready_ref: Any = None
    status_ref: Any = None
    status: dict[str, float] = field(default_factory=dict)
    pid: int = 0


@dataclass
class _TaskFaults:
    strikes: int = 0
    last_error: str = ""
    quarantined: bool = False


@dataclass
class _State:
    pending: deque[EpisodeSpec] = field(default_factory=deque)
    suspects: deque[EpisodeSpec] = field(default_factory=deque)
    in_flight: dict[Any, tuple[list[EpisodeSpec], _Slot]] = field(default_factory=dict)  # one Ray call each
    copies: dict[str, int] = field(default_factory=dict)  # episode ID -> copies in flight
    done: set[str] = field(default_factory=set)  # episode IDs accepted in this session


class RolloutJob:
    def __init__(self, config: RolloutConfig, *, store: TrajectoryStore | None = None) -> None:
        from rollout.policies import make_policy
        from rollout.tasks import load_tasks

        self.config = config
        parse_llm_spec(config.llm)
        make_policy(config.policy, seed=config.seed).close()  # a bad spec fails here, not in every actor
        if config.cpus_per_worker < 1:
            raise ValueError(f"cpus_per_worker must be at least 1, got {config.cpus_per_worker}")
        if config.replicas is not None and config.replicas < 1:
            raise ValueError(f"--replicas must be at least 1, got {config.replicas}")
        self.tasks = load_tasks(config.tasks)
        self.run_id = check_run_id(config.run_id or default_run_id(config.identity()))
        self.specs = plan_episodes(self.tasks, config.episodes, self.run_id, config.seed)
        self.store = store or TrajectoryStore(config.store_url, storage_options=config.storage_options,
                                              retry=RetryPolicy(budget_s=config.store_retry_budget_s))
        self.stats = ProgressStats(total=len(self.specs), llm_rpm_limit=config.llm_rpm, llm_tpm_limit=config.llm_tpm,
                                   llm_concurrency_limit=config.llm_concurrency)
        self.slots: list[_Slot] = []
        self.worker_restarts = 0
        self.backups = 0
        self.peak_rss_mb = 0.0
        self.solver_cpu_s = 0.0
        self._stop_reason = ""
        self.startup_s = 0.0
        self._worker_cpu: dict[int, float] = {}  # pid -> CPU seconds of its process tree, last seen
        self._solver_cache: dict[int, dict] = {}  # pid -> its solvers.cache_stats(), last seen
        self._t_dispatch = self._t_end = 0.0
        self.faults: dict[str, _TaskFaults] = {}
        from rollout.llm.budget import BudgetLimits

        self.budget_limits = BudgetLimits(config.llm_rpm, config.llm_tpm, config.llm_concurrency)
        self.budget: Any = None  # the BudgetCoordinator actor, when limits are set
        self.budget_stats: dict[str, Any] = {}
        self._last_status = 0.0
        self._rate_marks: deque[tuple[float, float, float]] = deque()  # (time, requests, tokens)

    # ---- public --------------------------------------------------------------------------

    def run(self) -> RolloutSummary:
        t0 = time.monotonic()
        meta = self._start_meta()
        committed = self.store.episode_ids(self.run_id)
        self.store.remove_orphans(self.run_id)
        todo = [s for s in self.specs if s.episode_id not in committed]
        self.stats.resumed = len(self.specs) - len(todo)
        if not self.config.retry_quarantined:
            todo = self._keep_quarantine(meta, todo)
        state = _State(pending=deque(todo))
        committer = Committer(self.store, self.run_id, max_age_s=self.config.commit_max_age_s).start()
        status, message = "completed", ""
        display = ProgressDisplay(self.stats, f"halo rollout {self.run_id}", enabled=self.config.progress)
        try:
            with display:
                if todo:
                    self._start_workers(len(todo))
                    self.stats.started = self._t_dispatch = time.monotonic()
                    status, message = self._loop(state, committer, display)
        except KeyboardInterrupt:
            status, message = "interrupted", "stopped by Ctrl-C; re-run the same command to resume"
        finally:
            self._stop_workers()
            committer.close()
            self.stats.committed = committer.committed
            self._t_end = time.monotonic()
        if committer.failure is not None:
            status = "failed"
            message = str(committer.failure)
        summary = self._summary(meta, committer, status, message, time.monotonic() - t0, state)
        self._finish_meta(meta, summary)
        return summary

    def worker_pids(self) -> list[int]:
        import ray

        return ray.get([s.actor.pid.remote() for s in self.slots if not s.dead])

    # ---- the loop ------------------------------------------------------------------------

    def _loop(self, state: _State, committer: Committer, display: ProgressDisplay) -> tuple[str, str]:
        import ray

        last_meta = time.monotonic()
        while state.pending or state.suspects or self._unfinished(state):
            if committer.failure is not None:
                return "failed", str(committer.failure)
            if self._stop_reason:
                return "failed", self._stop_reason
            self._poll_workers(state)
            if committer.pending < MAX_UNCOMMITTED:  # backpressure: let a slow store catch up
                self._dispatch(state)
            refs = list(state.in_flight)
            if not refs:
                if state.pending or state.suspects:
                    time.sleep(0.05)
                    continue
                break
            ready, rest = ray.wait(refs, num_returns=1, timeout=0.25)
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                if ref in state.in_flight:
                    self._collect(ref, state, committer)
            self.stats.in_flight = sum(s.in_flight for s in self.slots if not s.dead)
            self.stats.window = sum(s.window.size for s in self.slots if not s.dead)
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
            self.stats.committed = committer.committed
            display.refresh()
            if time.monotonic() - last_meta > 15:
                last_meta = time.monotonic()
                self._progress_meta(state)
        return "completed", ""

    @staticmethod
    def _unfinished(state: _State) -> bool:
        """Episodes in flight that no copy has finished (losing tail backups are not waited for)."""
        return any(spec.episode_id not in state.done for specs, _ in state.in_flight.values() for spec in specs)

    def _poll_workers(self, state: _State) -> None:
        """Replacement workers that came up; every status_interval_s each worker's counters, which
        drive its window's slow start and the live panel. Never blocks."""
        import ray

        starting = {slot.ready_ref: slot for slot in self.slots if not slot.dead and not slot.ready}
        if starting:
            done, _ = ray.wait(list(starting), num_returns=len(starting), timeout=0)
            for ref in done:
                slot = starting[ref]
                try:
                    slot.pid = ray.get(ref)
                    slot.ready = True
                except ray.exceptions.RayError:
                    self._worker_died(slot, state)
        asked = {slot.status_ref: slot for slot in self.slots if slot.status_ref is not None and not slot.dead}
        if asked:
            done, _ = ray.wait(list(asked), num_returns=len(asked), timeout=0)
            for ref in done:
                slot = asked[ref]
                slot.status_ref = None
                try:
                    slot.status = ray.get(ref)
                except ray.exceptions.RayError:
                    continue  # the batch calls report the death
                st = slot.status
                slot.window.on_status(in_flight=int(st["in_flight"]), solver_utilisation=st["solver_utilisation"],
                                      solver_queued=int(st["solver_queued"]), llm_waiting=int(st["llm_waiting"]),
                                      cpus=self.config.cpus_per_worker)
            self._panel_stats()
        now = time.monotonic()
        if now - self._last_status >= self.config.status_interval_s:
            self._last_status = now
            for slot in self.slots:
                if slot.ready and not slot.dead and slot.status_ref is None:
                    slot.status_ref = slot.actor.status.remote()

    def _panel_stats(self) -> None:
        live = [slot.status for slot in self.slots if not slot.dead and slot.status]
        s = self.stats
        s.llm_in_flight = int(sum(st["llm_in_flight"] for st in live))
        s.llm_waiting = int(sum(st["llm_waiting"] for st in live))
        s.solver_queued = int(sum(st["solver_queued"] for st in live))
        # Counters of workers that died are lost from the sums; the rates come from a 60 s window.
        s.llm_429 = max(s.llm_429, int(sum(st["llm_429"] for st in live)))
        requests = sum(st["llm_requests"] for st in live)
        tokens = sum(st["llm_tokens"] for st in live)
        now = time.monotonic()
        marks = self._rate_marks
        marks.append((now, requests, tokens))
        while len(marks) > 2 and now - marks[0][0] > 60:
            marks.popleft()
        t0, r0, k0 = marks[0]
        if now - t0 >= 1.0 and requests >= r0:
            s.llm_rpm = (requests - r0) / (now - t0) * 60
            s.llm_tpm = (tokens - k0) / (now - t0) * 60

    def _dispatch(self, state: _State) -> None:
        for slot in self.slots:
            if slot.dead or slot.solo or not slot.ready:
                continue
            if state.suspects and slot.in_flight == 0:
                spec = self._next(state.suspects)
                if spec is not None:
                    slot.solo = True
                    self._send([spec], slot, state)
                continue
            while state.pending and slot.in_flight < slot.window.size:
                batch = []
                room = min(self._batch_size(slot), slot.window.size - slot.in_flight)
                while len(batch) < room and (spec := self._next(state.pending)) is not None:
                    batch.append(spec)
                if not batch:
                    break
                self._send(batch, slot, state)
        if self.config.backup_tail and not state.pending and not state.suspects:
            self._dispatch_backups(state)

    def _dispatch_backups(self, state: _State) -> None:
        idle = [slot for slot in self.slots if slot.ready and not slot.dead and not slot.solo and slot.in_flight == 0]
        if not idle:
            return
        # Newest first: they started last, so they are likely to finish last. An episode already
        # done may still sit in a batch whose call has not returned: it needs no copy.
        candidates = [spec for specs, slot in reversed(state.in_flight.values()) if not slot.solo
                      for spec in reversed(specs)
                      if state.copies.get(spec.episode_id) == 1 and spec.episode_id not in state.done]
        per_call = self.config.max_backups_per_call
        for slot in idle:
            batch, candidates = candidates[:per_call], candidates[per_call:]
            if not batch:
                return
            self.backups += len(batch)
            self._send(batch, slot, state)

    def _batch_size(self, slot: _Slot) -> int:
        if self.config.episodes_per_call is not None:
            return self.config.episodes_per_call
        size = slot.window.size
        return max(1, min(MAX_AUTO_BATCH, size // 2), min(MAX_BIG_BATCH, size // 32))

    def _next(self, queue: deque[EpisodeSpec]) -> EpisodeSpec | None:
        while queue:
            spec = queue.popleft()
            if self._quarantined(spec.task_id):
                self.stats.dropped += 1
                continue
            return spec
        return None

    def _send(self, specs: list[EpisodeSpec], slot: _Slot, state: _State) -> None:
        ref = slot.actor.run_batch.remote(specs)
        state.in_flight[ref] = (specs, slot)
        slot.in_flight += len(specs)
        for spec in specs:
            state.copies[spec.episode_id] = state.copies.get(spec.episode_id, 0) + 1

    def _collect(self, ref: Any, state: _State, committer: Committer) -> None:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        specs, slot = state.in_flight[ref]
        try:
            batch: WorkerBatch = ray.get(ref)
        except RayTaskError as exc:
            self._release(ref, state)
            for spec in specs:
                if not self._settled(spec, state):
                    self._strike(spec, f"worker call failed: {exc}"[-3000:], state, requeue=state.pending)
            return
        except (RayActorError, ray.exceptions.RayError):
            self._worker_died(slot, state)
            return
        self._release(ref, state)
        self.peak_rss_mb = max(self.peak_rss_mb, batch.peak_rss_mb)
        self._worker_cpu[batch.worker_pid] = max(self._worker_cpu.get(batch.worker_pid, 0.0), batch.cpu_s)
        self._solver_cache[batch.worker_pid] = batch.extra.get("solver_cache") or {}
        accepted: list[EpisodeSummary] = []
        discarded = False
        for outcome in batch.outcomes:
            summary = outcome.summary
            if outcome.spec.episode_id in state.done:  # the other copy of a tail backup won
                discarded = True
                continue
            if summary is None or summary.num_steps == 0:  # raised, or ended on an error before any step
                if self._settled(outcome.spec, state):  # its other copy is still running: let it decide
                    continue
                kind = "episode_exception" if summary is None else "episode_error"
                self.stats.errors[kind] += 1
                slot.window.on_result(ok=False)
                self._strike(outcome.spec, outcome.error if summary is None else summary.error, state,
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

    @staticmethod
    def _settled(spec: EpisodeSpec, state: _State) -> bool:
        """True when this copy's failure does not count: the episode is done, or another copy runs."""
        return spec.episode_id in state.done or state.copies.get(spec.episode_id, 0) > 0

    @staticmethod
    def _forget_copies(specs: list[EpisodeSpec], state: _State) -> None:
        for spec in specs:
            left = state.copies.get(spec.episode_id, 0) - 1
            if left > 0:
                state.copies[spec.episode_id] = left
            else:
                state.copies.pop(spec.episode_id, None)

    def _release(self, ref: Any, state: _State) -> None:
        specs, slot = state.in_flight.pop(ref)
        slot.in_flight -= len(specs)
        self._forget_copies(specs, state)
        if slot.solo and slot.in_flight == 0:
            slot.solo = False

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

    def _worker_died(self, slot: _Slot, state: _State) -> None:
        if slot.dead:
            return
        slot.dead = True
        if self.budget is not None and slot.pid:  # its LLM calls died with it: their slots come back
            with contextlib.suppress(Exception):
                self.budget.forget_worker.remote(f"worker-{slot.pid}")
        self.stats.errors["worker_died"] += 1
        refs = [ref for ref, (_, s) in state.in_flight.items() if s is slot]
        lost = [spec for ref in refs for spec in state.in_flight.pop(ref)[0]]
        self._forget_copies(lost, state)
        alone = len(lost) == 1  # it ran alone: the death is this episode's doing
        for spec in lost:
            if self._settled(spec, state):  # a tail backup whose other copy is done or still running
                continue
            if alone:
                self._strike(spec, "the worker process died while running this episode "
                                   "(killed, out of memory, or crashed)", state, requeue=state.suspects)
            else:
                self.stats.retries += 1
                state.suspects.append(spec)
        self._replace_worker(slot)

    def _strike(self, spec: EpisodeSpec, error: str, state: _State, *, requeue: deque[EpisodeSpec]) -> None:
        faults = self.faults.setdefault(spec.task_id, _TaskFaults())
        if faults.quarantined:  # an episode of it was already in flight when it was quarantined
            self.stats.dropped += 1
            return
        faults.strikes += 1
        faults.last_error = error
        if faults.strikes >= self.config.max_attempts:
            faults.quarantined = True
            self.stats.quarantined_tasks += 1
            log.warning("quarantined task %s after %d failures: %s", spec.task_id, faults.strikes,
                        error.strip().splitlines()[0] if error.strip() else "")
            self.stats.dropped += 1
            return
        self.stats.retries += 1
        requeue.append(spec)

    def _keep_quarantine(self, meta: RunMeta, todo: list[EpisodeSpec]) -> list[EpisodeSpec]:
        """Tasks quarantined by an earlier session of this run stay out; their episodes are dropped."""
        if not meta.quarantined:
            return todo
        for q in meta.quarantined:
            self.faults[q.task_id] = _TaskFaults(strikes=q.attempts, last_error=q.error, quarantined=True)
        kept = [s for s in todo if not self._quarantined(s.task_id)]
        self.stats.dropped += len(todo) - len(kept)
        log.warning("resuming run %s without %d quarantined task(s) (%d episodes); --retry-quarantined "
                    "runs them again", self.run_id, len(meta.quarantined), len(todo) - len(kept))
        return kept

    def _quarantined(self, task_id: str) -> bool:
        faults = self.faults.get(task_id)
        return bool(faults and faults.quarantined)

    # ---- workers -------------------------------------------------------------------------

    def _actor_class(self) -> Any:
        import ray

        return ray.remote(num_cpus=self.config.cpus_per_worker, max_restarts=0, max_concurrency=1000)(RolloutWorker)

    def _start_workers(self, n_todo: int) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        replicas = self.config.replicas or max(1, cpus // self.config.cpus_per_worker)
        replicas = max(1, min(replicas, n_todo))
        if self.budget_limits.enabled:
            self.budget = self._start_budget()
        self._setup_ref = ray.put(WorkerSetup(
            run_id=self.run_id, tasks=self.tasks, policy_spec=self.config.policy, llm_spec=self.config.llm,
            max_steps=self.config.max_steps, seed=self.config.seed, cpus=self.config.cpus_per_worker,
            code_version=self.config.code_version, solver_timeout_s=self.config.solver_timeout_s,
            episode_fn=self.config.episode_fn, budget=self.budget,
            budget_limits=self.budget_limits if self.budget is not None else None, llm_pool=self.config.llm_pool))
        self._cls = self._actor_class()
        self._max_restarts = (self.config.max_worker_restarts if self.config.max_worker_restarts is not None
                              else 4 * replicas + 4)
        self.slots = [self._new_slot(i) for i in range(replicas)]
        self.stats.workers = replicas
        t0 = time.monotonic()
        pids = ray.get([slot.ready_ref for slot in self.slots])  # fail early if a worker cannot start
        for slot, pid in zip(self.slots, pids, strict=True):
            slot.ready, slot.pid = True, pid
        self.startup_s = time.monotonic() - t0

    def _start_budget(self) -> Any:
        """The job's one LLM budget: an actor on the driver's node (it lives as long as the job,
        whichever worker nodes die), using no CPU."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from rollout.llm.budget import BudgetCoordinator

        here = ray.get_runtime_context().get_node_id()
        actor = ray.remote(num_cpus=0, max_restarts=0)(BudgetCoordinator).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True)).remote(self.budget_limits)
        ray.get(actor.ping.remote())
        return actor

    def _new_slot(self, index: int) -> _Slot:
        initial = self.config.initial_window or 8 * self.config.cpus_per_worker
        window = AIMDWindow(limit=float(min(initial, self.config.max_window)), max_limit=float(self.config.max_window))
        actor = self._cls.remote(self._setup_ref)
        return _Slot(index, actor, window, ready_ref=actor.pid.remote())

    def _replace_worker(self, slot: _Slot) -> None:
        import ray

        ray.kill(slot.actor, no_restart=True)
        if self.worker_restarts >= self._max_restarts:
            self._stop_reason = (f"workers died {self.worker_restarts + 1} times; giving up (see the quarantined "
                                 f"tasks and worker logs). Committed episodes are kept; re-run to resume.")
            return
        self.worker_restarts += 1
        self.slots[slot.index] = self._new_slot(slot.index)

    def _stop_workers(self) -> None:
        import ray

        for slot in self.slots:
            if not slot.dead:
                with contextlib.suppress(Exception):  # already gone
                    ray.kill(slot.actor, no_restart=True)
                slot.dead = True
        if self.budget is not None:
            import ray

            with contextlib.suppress(Exception):
                self.budget_stats = ray.get(self.budget.stats.remote(), timeout=10)
            with contextlib.suppress(Exception):
                ray.kill(self.budget, no_restart=True)
            self.budget = None

    # ---- run metadata --------------------------------------------------------------------

    def _start_meta(self) -> RunMeta:
        meta = self.store.read_run_meta(self.run_id)
        identity = self.config.identity()
        if meta is not None:
            before = {k: meta.config.get(k) for k in IDENTITY_KEYS}
            if before != identity:
                diff = ", ".join(f"{k}: {before[k]!r} -> {identity[k]!r}" for k in IDENTITY_KEYS
                                 if before[k] != identity[k])
                raise ValueError(f"run {self.run_id} already exists in {self.store.url} with other arguments "
                                 f"({diff}); use another --run-id, or the same arguments to resume it")
        else:
            meta = RunMeta(self.run_id)
        meta.status = "running"
        meta.config = {**identity, "episodes": self.config.episodes, "store": self.store.url,
                       "replicas": self.config.replicas, "cpus_per_worker": self.config.cpus_per_worker}
        meta.llm_backend = parse_llm_spec(self.config.llm)[0]
        meta.policy = self.config.policy
        meta.episodes_requested = len(self.specs)
        meta.message = ""
        self.store.write_run_meta(meta)
        self._meta = meta
        return meta

    def _progress_meta(self, state: _State) -> None:
        self._meta.episodes_committed = self.stats.resumed + self.stats.committed
        self._meta.errors = dict(self.stats.errors)
        with contextlib.suppress(StoreUnavailable):  # the committer reports outages; this is best effort
            self.store.write_run_meta(self._meta)

    def _summary(self, meta: RunMeta, committer: Committer, status: str, message: str, wall_s: float,
                 state: _State) -> RolloutSummary:
        quarantined = [QuarantinedTask(task_id, f.last_error, f.strikes) for task_id, f in self.faults.items()
                       if f.quarantined]
        return RolloutSummary(
            run_id=self.run_id, status=status, store_url=self.store.url, requested=len(self.specs),
            resumed=self.stats.resumed, committed=committer.committed, succeeded=self.stats.succeeded,
            dropped=self.stats.dropped, quarantined=quarantined, errors=dict(self.stats.errors), wall_s=wall_s,
            startup_s=self.startup_s, run_s=max(0.0, self._t_end - self._t_dispatch) if self._t_dispatch else 0.0,
            workers=len(self.slots), cpus_used=len(self.slots) * self.config.cpus_per_worker,
            solver_cpu_s=self.solver_cpu_s, worker_cpu_s=sum(self._worker_cpu.values()),
            peak_rss_mb=self.peak_rss_mb, worker_restarts=self.worker_restarts,
            retries=self.stats.retries, backups=self.backups, commits=committer.commits, commit_s=committer.commit_s,
            rows_committed=committer.rows, message=message,
            solver_cache={k: sum(c.get(k, 0) for c in self._solver_cache.values()) for k in ("hits", "misses")},
            max_in_flight=self.stats.max_in_flight, llm_429=self.stats.llm_429, budget=dict(self.budget_stats),
        )

    def _finish_meta(self, meta: RunMeta, summary: RolloutSummary) -> None:
        meta.status = summary.status
        meta.message = summary.message
        meta.episodes_committed = summary.resumed + summary.committed
        meta.episodes_failed = summary.dropped
        meta.quarantined = summary.quarantined
        meta.errors = summary.errors
        try:
            self.store.write_run_meta(meta)
        except StoreUnavailable as exc:
            log.error("could not record the run's final status: %s", exc)


def run_rollout(config: RolloutConfig, *, store: TrajectoryStore | None = None) -> RolloutSummary:
    return RolloutJob(config, store=store).run()

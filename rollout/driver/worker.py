"""The rollout worker: one Ray actor running many episodes at once in its asyncio loop.

Episodes spend their time waiting (on an LLM endpoint, on solver subprocesses). The worker keeps
many in flight; solver and other blocking calls go through `asyncio.to_thread`, i.e. the loop's
default executor, which the worker replaces with a pool sized to the CPUs it holds, so solver
work never oversubscribes them. The pool measures how long calls queue, which feeds the
driver's AIMD window.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import resource
import threading
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import solvers
from rollout.core.trajectory import EpisodeRecord
from rollout.driver.episode_set import EpisodeSpec
from rollout.tasks.base import Task
from solvers.errors import count_handled

EpisodeFn = Callable[..., Awaitable[EpisodeRecord]]  # (task, policy, config, *, episode_id) -> record
ROWS_CODEC = "lz4"  # of WorkerBatch.rows_ipc (an LZ4 frame)
REPORT_INTERVAL_S = 0.5  # the shortest time between two chunks of a worker's results, unless ...
REPORT_SHARE = 0.5  # ... this share of its episodes out has finished


@dataclass
class WorkerSetup:
    run_id: str
    tasks: list[Task]
    policy_spec: str
    llm_spec: str = "sim"
    max_steps: int = 10
    seed: int = 0  # the policy's seed (episode seeds come with each EpisodeSpec)
    cpus: int = 1
    code_version: str = ""
    solver_timeout_s: float | None = None
    episode_fn: EpisodeFn | None = None  # None: rollout.loop.episode.run_episode (over rollout.loop.env.RefinementEnv)
    budget: Any = None  # the job's BudgetCoordinator actor (rollout.llm.budget), None: no limits
    budget_limits: Any = None  # its BudgetLimits
    llm_pool: int = 512  # HTTP connections (and calls in flight) of the worker's one LLM client
    pin_cpus: bool = False  # pin the worker (and its solver processes) to CPUs of its own (cpu_pinning.py);
    # the job sets it, a worker made in-process (tests, a debug run) leaves its process as it is


@dataclass(frozen=True)
class EpisodeSummary:
    """What the driver needs of a finished episode (progress, faults); the rows go to the committer."""

    episode_id: str
    task_id: str
    num_steps: int
    success_validator: bool
    success_oracle: bool | None
    error: str
    last_error_category: str
    solver_cpu_s: float
    infra_error: str = ""  # a dependency failed (rollout/core/infra.py): not committed, run again

    @classmethod
    def of(cls, record: EpisodeRecord) -> EpisodeSummary:
        last = record.steps[-1].error_category if record.steps else ""
        return cls(record.episode_id, record.task_id, record.num_steps, bool(record.success_validator),
                   record.success_oracle, record.error, last, record.solver_cpu_s, record.infra_error)


@dataclass
class EpisodeOutcome:
    """One episode of a batch: its summary, or the exception that escaped the episode function."""

    spec: EpisodeSpec
    summary: EpisodeSummary | None
    error: str = ""  # an exception that escaped the episode (the episode function itself broke)
    llm_latency_ms: float | None = None


@dataclass
class WorkerBatch:
    """What one `run_batch` call returns, or one chunk of `results`: per-episode outcomes, their
    step rows, the worker's state."""

    outcomes: list[EpisodeOutcome]
    # The step rows (STEP_SCHEMA) of every episode that has steps, as one Arrow IPC stream,
    # converted here so the single committer only writes. Bytes, not a pa.Table: Ray pickles a
    # table column by column, IPC bytes cost next to nothing. The stream is LZ4-compressed: a
    # batch's raw stream is over Ray's 100 KB limit for returning a value inline, and a return
    # through the object store costs more CPU per call (worker, raylet, driver). One frame over the
    # whole stream, not Arrow's per-buffer IPC compression, which is dearer on the same rows
    # (figures: docs/results/2026-12-03-code-figures.md).
    rows_ipc: bytes | None = None
    rows_ipc_size: int = 0  # its size uncompressed
    solver_wait_s: float = 0.0
    solver_run_s: float = 0.0
    worker_pid: int = 0
    peak_rss_mb: float = 0.0
    cpu_s: float = 0.0  # CPU time of the worker's process tree (itself + solver processes) since start-up
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> pa.Table | None:
        if self.rows_ipc is None:
            return None
        raw = pa.decompress(self.rows_ipc, decompressed_size=self.rows_ipc_size, codec=ROWS_CODEC, asbytes=True)
        return pa.ipc.open_stream(raw).read_all()


class MeteredExecutor(ThreadPoolExecutor):
    """A thread pool that records, per call, how long it queued and how long it ran."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="halo-solver")
        self._lock = threading.Lock()
        self.wait_s = 0.0  # exponentially weighted averages
        self.run_s = 0.0
        self.calls = 0
        self.queued = 0  # calls waiting for a thread now (episodes waiting on a solver CPU)
        self.busy_s = 0.0  # thread-seconds of finished calls

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        submitted = time.perf_counter()
        with self._lock:
            self.queued += 1

        def timed() -> Any:
            started = time.perf_counter()
            with self._lock:
                self.queued -= 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._record(started - submitted, time.perf_counter() - started)

        return super().submit(timed)

    def _record(self, wait: float, run: float) -> None:
        with self._lock:
            self.calls += 1
            self.busy_s += run
            a = 0.1 if self.calls > 10 else 1.0 / self.calls
            self.wait_s += a * (wait - self.wait_s)
            self.run_s += a * (run - self.run_s)


class RolloutWorker:
    """Wrapped with ray.remote by the job; also usable directly (tests, a local debug run)."""

    def __init__(self, setup: WorkerSetup) -> None:
        from rollout.llm.budget import LLMGate, install_gate
        from rollout.loop.backends import agent_backend_for
        from rollout.policies import make_policy

        self.setup = setup
        self.cpu_claim = None
        if setup.pin_cpus:
            from rollout.driver.cpu_pinning import pin_to_claimed_cpus

            # Before anything starts a thread or a solver process: they inherit the affinity.
            self.cpu_claim = pin_to_claimed_cpus(max(1, setup.cpus))
        # Every LLM call of this process (agents, teacher, simulated world) draws from the job's budget.
        self.gate = install_gate(LLMGate(setup.budget, setup.budget_limits, worker=f"worker-{os.getpid()}"))
        self.policy = make_policy(setup.policy_spec, seed=setup.seed)
        pool = setup.llm_pool
        if setup.budget_limits is not None and setup.budget_limits.concurrency:
            pool = max(1, min(pool, int(setup.budget_limits.concurrency)))
        # One backend for all the worker's episodes: its one LLM client (and its connection pool).
        self.agents = agent_backend_for(setup.llm_spec, pool=pool)
        self.llm = self.agents.llm
        self.executor = MeteredExecutor(max(1, setup.cpus))
        self._in_flight = 0
        self._running: set[asyncio.Task] = set()  # submitted episodes not finished
        self._finished: list[tuple[EpisodeSpec, EpisodeRecord | str]] = []  # ... finished, not yet reported
        self._arrived = asyncio.Event()
        self._status_at = (time.perf_counter(), 0.0)
        self._installed = False
        self._warm_up()
        # What start-up built (modules, Ray, pyarrow, the tasks) lives as long as the worker: out
        # of the collector's sight, each full collection walks only the episodes' objects.
        gc.collect()
        gc.freeze()
        # Start-up (imports, solver workers) is not episode work: CPU is reported from here on.
        self._cpu_at_start = _tree_cpu_s()

    def _warm_up(self) -> None:
        """Import the episode code and start the sandboxed solver workers now, so the job's first
        episodes do not pay for it while the driver is already timing them."""
        import rollout.loop.episode  # noqa: F401
        import rollout.sim.world  # noqa: F401
        from solvers.pool import get_pool

        try:
            get_pool().warm(max(1, self.setup.cpus))
        except Exception as exc:  # noqa: BLE001  (episodes will report solver failures themselves)
            import logging

            logging.getLogger("halo.rollout").warning("solver warm-up failed: %s", exc)

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def status(self) -> dict[str, float]:
        """A cheap snapshot the driver polls twice a second: window control and the live panel."""
        now, busy = time.perf_counter(), self.executor.busy_s
        then, busy_then = self._status_at
        self._status_at = (now, busy)
        utilisation = (busy - busy_then) / max(1e-6, (now - then) * self.executor._max_workers)
        return {"in_flight": self._in_flight, "solver_queued": self.executor.queued,
                "solver_utilisation": min(1.0, utilisation), "solver_wait_s": self.executor.wait_s,
                "solver_run_s": self.executor.run_s, "rss_mb": _rss_mb(), **self.gate.stats.snapshot()}

    def pinned_cpus(self) -> list[int]:
        """The CPUs this worker claimed and runs on; empty when it runs unpinned."""
        return list(self.cpu_claim.cpus) if self.cpu_claim is not None else []

    async def run_batch(self, specs: list[EpisodeSpec]) -> WorkerBatch:
        """Run the episodes concurrently and return them all at once (tests, a local debug run)."""
        self._install()
        ran = await asyncio.gather(*(self._guarded(spec) for spec in specs))
        return self._batch(specs, ran)

    async def submit(self, specs: list[EpisodeSpec]) -> None:
        """Start the episodes; they report through `results` as they finish."""
        self._install()
        loop = asyncio.get_running_loop()
        for spec in specs:
            task = loop.create_task(self._guarded(spec))
            self._running.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(functools.partial(self._finished_one, spec))

    def _finished_one(self, spec: EpisodeSpec, task: asyncio.Task) -> None:
        self._running.discard(task)
        self._finished.append((spec, task.result()))  # _guarded never raises
        self._arrived.set()

    async def results(self, interval_s: float = REPORT_INTERVAL_S) -> AsyncIterator[WorkerBatch]:
        """The submitted episodes as they finish, in chunks, for as long as the worker lives (the
        driver reads it as one Ray streaming generator per worker; one reader only). A chunk
        goes at most every `interval_s`, sooner when a REPORT_SHARE of the episodes out have
        finished or nothing else runs: a finished episode never waits for others submitted with
        it. (Returning each submitted batch whole held finished episodes for their slowest
        batch-mate, with LLM latencies most of an episode's time in flight; a chunk per call and
        per finish cost a Ray return per episode.)"""
        loop = asyncio.get_running_loop()
        last = -interval_s
        while True:
            await self._arrived.wait()
            deadline = last + interval_s
            # Half the worker's episodes out waiting in a chunk is enough: the driver sends more
            # only when they come back (with windows of a few episodes, as in the CPU-bound
            # regime, waiting the whole interval left the CPUs idle between bursts).
            while (self._running and loop.time() < deadline
                   and len(self._finished) < REPORT_SHARE * (len(self._running) + len(self._finished))):
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), deadline - loop.time())
            chunk, self._finished = self._finished, []
            self._arrived.clear()
            last = loop.time()
            yield self._batch([spec for spec, _ in chunk], [got for _, got in chunk])

    def _install(self) -> None:
        if not self._installed:
            asyncio.get_running_loop().set_default_executor(self.executor)
            self._installed = True
            self._status_at = (time.perf_counter(), self.executor.busy_s)  # idle before the first batch is no signal

    async def _guarded(self, spec: EpisodeSpec) -> EpisodeRecord | str:
        self._in_flight += 1
        try:
            return await self._episode(spec)
        except Exception as exc:  # noqa: BLE001  (reported to the driver, which counts strikes)
            count_handled("rollout worker: episode", exc)
            tb = traceback.format_exc(limit=6)
            return f"{type(exc).__name__}: {exc}\n{tb}"[-3000:]
        finally:
            self._in_flight -= 1

    async def _episode(self, spec: EpisodeSpec) -> EpisodeRecord:
        from rollout.loop.episode import EpisodeConfig, run_episode
        from rollout.sim.backend import SimAgents

        s = self.setup
        # backend= is what run_episode uses; the other fields describe it for custom episode functions
        sim = self.agents.config if isinstance(self.agents, SimAgents) else None
        config = EpisodeConfig(max_steps=s.max_steps, llm_backend=self.agents.name, seed=spec.seed, run_id=s.run_id,
                               sim=sim, llm=self.llm, code_version=s.code_version, backend=self.agents)
        if s.solver_timeout_s is not None:
            from dataclasses import replace

            config.limits = replace(config.limits, timeout_s=s.solver_timeout_s)
        fn = s.episode_fn or run_episode
        record = await fn(s.tasks[spec.task_index], self.policy, config, episode_id=spec.episode_id)
        if self.llm is not None and hasattr(self.llm, "drain_records"):
            self.llm.drain_records()  # the record already carries the per-step accounting
        return record

    def _batch(self, specs: list[EpisodeSpec], ran: list[EpisodeRecord | str]) -> WorkerBatch:
        outcomes = []
        with_steps = []
        for spec, got in zip(specs, ran, strict=True):
            if isinstance(got, str):
                outcomes.append(EpisodeOutcome(spec, None, error=got))
                continue
            outcomes.append(EpisodeOutcome(spec, EpisodeSummary.of(got), llm_latency_ms=_mean_llm_latency_ms(got)))
            if got.steps and not got.infra_error:  # an infra failure is never committed
                with_steps.append(got)
        rows, rows_size = None, 0
        if with_steps:
            from rollout.store.steps_table import episodes_to_arrow

            table = episodes_to_arrow(with_steps)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            raw = sink.getvalue()
            rows, rows_size = pa.compress(raw, codec=ROWS_CODEC, asbytes=True), raw.size
        return WorkerBatch(
            outcomes=outcomes, rows_ipc=rows, rows_ipc_size=rows_size,
            solver_wait_s=self.executor.wait_s, solver_run_s=self.executor.run_s, worker_pid=os.getpid(),
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            cpu_s=_tree_cpu_s() - self._cpu_at_start,
            extra={"solver_cache": solvers.cache_stats(), "pinned_cpus": self.pinned_cpus()},
        )


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _mean_llm_latency_ms(record: EpisodeRecord) -> float | None:
    if not record.total_llm_calls:
        return None
    llm_steps = [st for st in record.steps if st.llm_calls]
    return sum(st.latency_ms for st in llm_steps) / max(1, sum(st.llm_calls for st in llm_steps))


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tree_cpu_s() -> float:
    """CPU seconds used by this process, its finished children and its live descendants.

    Read straight from /proc (a few small files per live descendant): it runs once per episode,
    and psutil's recursive children() scans every process on the machine."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    stack = _child_pids(os.getpid())
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        # after "(comm)": state is field 0, utime/stime/cutime/cstime are fields 11-14
        total += sum(int(x) for x in fields[11:15]) / _CLOCK_TICKS  # reaped planner runs are in cutime
        stack.extend(_child_pids(pid))
    return total


def _child_pids(pid: int) -> list[int]:
    """Children of every thread of `pid` (a child belongs to the thread that forked it)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(x) for x in fh.read().split())
        except OSError:
            continue
    return out

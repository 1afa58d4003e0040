"""The life cycle of a rollout job's Ray actors: starting the workers (and the job's LLM budget
actor), noticing when a replacement is up, reading each worker's counters, replacing a worker
that died (within a restart budget) and stopping them all.

A `Slot` is one worker position: its actor, its AIMD window and the episodes in flight on it;
a replaced worker takes the same slot index.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rollout.driver.aimd import AIMDWindow
from rollout.driver.config import RolloutConfig
from rollout.driver.episode_set import EpisodeSpec
from rollout.driver.progress import ProgressStats
from rollout.driver.worker import RolloutWorker, WorkerSetup
from rollout.llm.budget import BudgetLimits
from rollout.tasks.base import Task

log = logging.getLogger(__name__)

BUDGET_START_S = 60.0  # the budget actor's start on the driver's node, before it may go elsewhere


@dataclass
class Slot:
    index: int
    actor: Any
    window: AIMDWindow
    # episode ID -> (submit order, spec) of the episodes out on this worker, not yet reported
    out: dict[str, tuple[int, EpisodeSpec]] = field(default_factory=dict)
    results: Any = None  # the worker's results stream (a Ray ObjectRefGenerator)
    solo: bool = False  # running one suspect episode alone
    dead: bool = False
    ready: bool = False  # answered once (a replacement may wait for a node with a free CPU)
    ready_ref: Any = None
    status_ref: Any = None
    status: dict[str, float] = field(default_factory=dict)
    pid: int = 0

    @property
    def in_flight(self) -> int:
        return len(self.out)


class WorkerPool:
    def __init__(self, config: RolloutConfig) -> None:
        self.config = config
        self.slots: list[Slot] = []
        self.restarts = 0
        self.stop_reason = ""  # set when workers died more often than the restart budget allows
        self.startup_s = 0.0
        self.budget_limits = BudgetLimits(config.llm_rpm, config.llm_tpm, config.llm_concurrency)
        self.budget: Any = None  # the BudgetCoordinator actor, when limits are set
        self.budget_stats: dict[str, Any] = {}
        self._budget_ping: Any = None  # an answer awaited from the budget actor (is it alive?)
        self._last_status = 0.0
        self._rate_marks: deque[tuple[float, float, float]] = deque()  # (time, requests, tokens)

    def live(self) -> list[Slot]:
        return [slot for slot in self.slots if not slot.dead]

    def pids(self) -> list[int]:
        import ray

        return ray.get([s.actor.pid.remote() for s in self.live()])

    # ---- starting ------------------------------------------------------------------------

    def start(self, n_todo: int, run_id: str, tasks: list[Task]) -> None:
        """Start Ray (in process unless it runs), the budget actor and the workers; returns once
        every worker answered (a worker that cannot start fails here)."""
        import ray

        config = self.config
        if not ray.is_initialized():
            ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        replicas = config.replicas or max(1, cpus // config.cpus_per_worker)
        replicas = max(1, min(replicas, n_todo))
        if self.budget_limits.enabled:
            self.budget = self._start_budget()
        self._setup_ref = ray.put(WorkerSetup(
            run_id=run_id, tasks=tasks, policy_spec=config.policy, llm_spec=config.llm,
            max_steps=config.max_steps, seed=config.seed, cpus=config.cpus_per_worker,
            code_version=config.code_version, solver_timeout_s=config.solver_timeout_s,
            episode_fn=config.episode_fn, budget=self.budget,
            budget_limits=self.budget_limits if self.budget is not None else None, llm_pool=config.llm_pool,
            pin_cpus=config.pin_cpus))
        self._cls = ray.remote(num_cpus=config.cpus_per_worker, max_restarts=0, max_concurrency=1000)(RolloutWorker)
        self._max_restarts = (config.max_worker_restarts if config.max_worker_restarts is not None
                              else 4 * replicas + 4)
        self.slots = [self._new_slot(i) for i in range(replicas)]
        t0 = time.monotonic()
        pids = ray.get([slot.ready_ref for slot in self.slots])  # fail early if a worker cannot start
        for slot, pid in zip(self.slots, pids, strict=True):
            slot.ready, slot.pid = True, pid
        self.startup_s = time.monotonic() - t0

    def _start_budget(self) -> Any:
        """The job's one LLM budget: an actor on the driver's node (it lives as long as the job,
        whichever worker nodes die), using no CPU.

        The affinity is hard: with soft=True Ray (2.x) placed it on a worker node most of the
        time (5 of 6 tries on a head with 0 CPUs), and when that node died every surviving
        worker's LLM calls waited for a budget that was gone, so the job never finished. A
        0-CPU actor always fits on the driver's node; if it does not come up there in
        BUDGET_START_S anyway, it goes wherever Ray puts it (and `poll` notices if it dies)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from rollout.llm.budget import BudgetCoordinator

        cls = ray.remote(num_cpus=0, max_restarts=0)(BudgetCoordinator)
        here = ray.get_runtime_context().get_node_id()
        actor = cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote(
            self.budget_limits)
        try:
            ray.get(actor.ping.remote(), timeout=BUDGET_START_S)
        except ray.exceptions.GetTimeoutError:
            log.warning("the LLM budget actor did not start on the driver's node in %.0f s; placing it "
                        "anywhere (if its node dies, the job stops)", BUDGET_START_S)
            ray.kill(actor, no_restart=True)
            actor = cls.remote(self.budget_limits)
            ray.get(actor.ping.remote())
        return actor

    def _new_slot(self, index: int) -> Slot:
        initial = self.config.initial_window or 8 * self.config.cpus_per_worker
        window = AIMDWindow(limit=float(min(initial, self.config.max_window)), max_limit=float(self.config.max_window))
        actor = self._cls.remote(self._setup_ref)
        return Slot(index, actor, window, ready_ref=actor.pid.remote(),
                    results=actor.results.options(num_returns="streaming").remote())

    # ---- while running -------------------------------------------------------------------

    def poll(self, stats: ProgressStats, on_death: Callable[[Slot], None]) -> None:
        """Replacement workers that came up (`on_death` for one that failed to); every
        status_interval_s each worker's counters, which drive its window's slow start and the
        live panel. Never blocks."""
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
                    on_death(slot)
        asked = {slot.status_ref: slot for slot in self.slots if slot.status_ref is not None and not slot.dead}
        if asked:
            done, _ = ray.wait(list(asked), num_returns=len(asked), timeout=0)
            for ref in done:
                slot = asked[ref]
                slot.status_ref = None
                try:
                    slot.status = ray.get(ref)
                except ray.exceptions.RayError:
                    continue  # its results stream reports the death
                st = slot.status
                # Full means out on the worker (running, or finished and in the next chunk).
                slot.window.on_status(in_flight=slot.in_flight, solver_utilisation=st["solver_utilisation"],
                                      solver_queued=int(st["solver_queued"]), llm_waiting=int(st["llm_waiting"]),
                                      cpus=self.config.cpus_per_worker)
            self._panel_stats(stats)
        self._check_budget()
        now = time.monotonic()
        if now - self._last_status >= self.config.status_interval_s:
            self._last_status = now
            if self.budget is not None and self._budget_ping is None:
                self._budget_ping = self.budget.ping.remote()
            for slot in self.slots:
                if slot.ready and not slot.dead and slot.status_ref is None:
                    slot.status_ref = slot.actor.status.remote()

    def _check_budget(self) -> None:
        """Without its budget actor no worker gets another LLM call (their gates wait for it):
        the job stops rather than wait for ever. Never blocks."""
        import ray

        ping = self._budget_ping
        if ping is None or not ray.wait([ping], timeout=0)[0]:
            return
        self._budget_ping = None
        try:
            ray.get(ping)
        except ray.exceptions.RayError as exc:
            self.stop_reason = (f"the job's LLM budget actor died ({type(exc).__name__}); no worker can make "
                                f"another LLM call. Committed episodes are kept; re-run to resume.")

    def _panel_stats(self, s: ProgressStats) -> None:
        live = [slot.status for slot in self.slots if not slot.dead and slot.status]
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

    # ---- dying and stopping --------------------------------------------------------------

    def retire(self, slot: Slot) -> bool:
        """Mark a worker dead; False if it already was. Its LLM calls died with it: their budget
        slots come back."""
        if slot.dead:
            return False
        slot.dead = True
        if self.budget is not None and slot.pid:
            with contextlib.suppress(Exception):
                self.budget.forget_worker.remote(f"worker-{slot.pid}")
        return True

    def replace(self, slot: Slot) -> None:
        """A fresh worker in a retired one's slot, unless the restart budget is spent (then
        `stop_reason` says so and the slot stays dead)."""
        import ray

        ray.kill(slot.actor, no_restart=True)
        if self.restarts >= self._max_restarts:
            self.stop_reason = (f"workers died {self.restarts + 1} times; giving up (see the quarantined "
                                f"tasks and worker logs). Committed episodes are kept; re-run to resume.")
            return
        self.restarts += 1
        self.slots[slot.index] = self._new_slot(slot.index)

    def stop(self) -> None:
        import ray

        for slot in self.slots:
            if not slot.dead:
                with contextlib.suppress(Exception):  # already gone
                    ray.kill(slot.actor, no_restart=True)
                slot.dead = True
        if self.budget is not None:
            with contextlib.suppress(Exception):
                self.budget_stats = ray.get(self.budget.stats.remote(), timeout=10)
            with contextlib.suppress(Exception):
                ray.kill(self.budget, no_restart=True)
            self.budget = None

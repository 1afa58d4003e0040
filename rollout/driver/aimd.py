"""Additive-increase / multiplicative-decrease control of how many episodes one worker runs at once.

Grow the window by about one episode per window's worth of clean completions; halve it (at most
once per window) when the LLM endpoint slows down or fails. Solver calls queueing behind the
worker's CPUs mean the CPUs are saturated: the window stops growing (more episodes would only
wait), but a short queue is what keeps the solver threads busy between episodes, so it is only
cut when calls wait far longer than they run. (Halving at the first queue kept windows at 1-2 in
the simulated world and left the CPUs idle while each worker waited for its next episode.)

Slow start (`on_status`, fed twice a second from the worker's own counters): while the worker's
solver threads have idle time, nothing queues for them and no LLM call waits for the job's
budget, the window doubles per status; the first sign of saturation (a solver queue, the budget)
ends slow start, after which idle CPUs grow it by a sixteenth per status. In the LLM-bound
regime (episodes mostly wait seconds on LLM calls) this reaches hundreds or thousands in flight
within seconds instead of +1 per window of completions, which took minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AIMDWindow:
    limit: float = 4.0
    min_limit: float = 1.0
    max_limit: float = 256.0
    latency_factor: float = 2.0  # recent LLM latency above this multiple of the long-run level = congestion
    queue_factor: float = 2.0  # solver queue wait above this multiple of solver run time = CPUs saturated
    queue_cut_factor: float = 8.0  # ... above this multiple: a queue far longer than needed, cut
    ewma_alpha: float = 0.2  # the recent latency level
    baseline_alpha: float = 0.02  # the long-run level: slow enough that noise does not look like congestion
    _latency_ewma: float | None = field(default=None, init=False)
    _latency_baseline: float | None = field(default=None, init=False)
    _latency_samples: int = field(default=0, init=False)
    _since_decrease: int = field(default=0, init=False)
    decreases: int = field(default=0, init=False)
    slow_start: bool = field(default=True, init=False)
    idle_below: float = 0.9  # solver utilisation under this (and no long queue) = CPUs to spare

    def on_status(self, *, in_flight: int, solver_utilisation: float, solver_queued: int, llm_waiting: int,
                  cpus: int = 1) -> str:
        """Feed one worker status; returns "increase", "hold" (or "exit" when slow start ends)."""
        if in_flight < 0.75 * self.size:  # the window is not full (nothing left to send, or batches
            return "hold"  # on their way): its size says nothing yet
        budget_bound = llm_waiting > max(2, 0.05 * in_flight)
        # A queue of a few calls comes and goes even on half-busy CPUs (episodes arrive in bursts):
        # only a longer one, or threads busy nearly all the time, says the CPUs are the limit.
        cpu_bound = solver_queued > 4 * cpus or solver_utilisation >= self.idle_below
        if budget_bound or cpu_bound:
            if self.slow_start:
                self.slow_start = False
                return "exit"
            return "hold"
        if self.slow_start:
            self.limit = min(self.max_limit, self.limit * 2)
        else:
            self.limit = min(self.max_limit, self.limit + max(1.0, self.limit / 16))
        return "increase"

    @property
    def size(self) -> int:
        return max(int(self.min_limit), int(self.limit))

    def on_result(self, *, ok: bool, llm_latency_ms: float | None = None, solver_wait_s: float = 0.0,
                  solver_run_s: float = 0.0) -> str:
        """Feed one finished episode; returns what happened: "increase", "decrease" or "hold"."""
        self._since_decrease += 1
        if not ok:
            return self._decrease()
        if llm_latency_ms is not None and llm_latency_ms > 0:
            # A fast average against a slow one: a single slow call, or latencies that are merely
            # noisy, is not congestion; a sustained rise is, until the slow average catches up (so
            # a permanently slower endpoint is not a permanent cut). Comparing against the fastest
            # call ever seen cut windows to 1-2 on noise alone.
            self._latency_samples += 1
            if self._latency_ewma is None or self._latency_baseline is None:
                self._latency_ewma = self._latency_baseline = llm_latency_ms
            else:
                self._latency_ewma += self.ewma_alpha * (llm_latency_ms - self._latency_ewma)
                self._latency_baseline += self.baseline_alpha * (llm_latency_ms - self._latency_baseline)
            if self._latency_samples >= 5 and self._latency_ewma > self.latency_factor * self._latency_baseline:
                return self._decrease()
        # The queue that counts as far too long grows with the window: with hundreds of episodes in
        # flight (LLM-bound), bursts of a dozen solver calls are normal and cutting on them halved
        # windows the CPUs needed (figures: docs/results/2026-12-03-code-figures.md).
        cut = self.queue_cut_factor * max(1.0, self.limit / 16)
        # ... and with it what an episode waits on the LLM per step: a queue shorter than two LLM
        # calls costs an LLM-bound episode little, and is mostly one long solver call (a hard
        # search holding the worker's solver thread for seconds) that the queue drains after;
        # halving there left the CPUs idle while the window regrew.
        llm_wait_s = 2 * (self._latency_baseline or 0.0) / 1000
        if solver_run_s > 0 and solver_wait_s > max(cut * solver_run_s, llm_wait_s):
            return self._decrease()
        if solver_run_s > 0 and solver_wait_s > self.queue_factor * solver_run_s:
            return "hold"
        self.limit = min(self.max_limit, self.limit + 1.0 / max(self.limit, 1.0))
        return "increase"

    def _decrease(self) -> str:
        if self._since_decrease < self.limit:  # one cut per window, not one per slow episode
            return "hold"
        self.slow_start = False
        self.limit = max(self.min_limit, self.limit / 2)
        self._since_decrease = 0
        self.decreases += 1
        return "decrease"

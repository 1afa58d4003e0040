"""Additive-increase / multiplicative-decrease control of how many episodes one worker runs at once.

Grow the window by about one episode per window's worth of clean completions; halve it (at most
once per window) when the LLM endpoint slows down or fails, or when solver calls queue behind
the worker's CPUs for longer than they take to run (more episodes in flight would only wait).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AIMDWindow:
    limit: float = 4.0
    min_limit: float = 1.0
    max_limit: float = 256.0
    latency_factor: float = 2.0  # LLM latency above this multiple of the best seen = congestion
    queue_factor: float = 2.0  # solver queue wait above this multiple of solver run time = CPUs saturated
    ewma_alpha: float = 0.2
    _latency_ewma: float | None = field(default=None, init=False)
    _latency_floor: float | None = field(default=None, init=False)
    _since_decrease: int = field(default=0, init=False)
    decreases: int = field(default=0, init=False)

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
            self._latency_ewma = llm_latency_ms if self._latency_ewma is None else (
                self.ewma_alpha * llm_latency_ms + (1 - self.ewma_alpha) * self._latency_ewma)
            self._latency_floor = llm_latency_ms if self._latency_floor is None else min(
                self._latency_floor, llm_latency_ms)
            if self._latency_ewma > self.latency_factor * self._latency_floor:
                return self._decrease()
        if solver_run_s > 0 and solver_wait_s > self.queue_factor * solver_run_s:
            return self._decrease()
        self.limit = min(self.max_limit, self.limit + 1.0 / max(self.limit, 1.0))
        return "increase"

    def _decrease(self) -> str:
        if self._since_decrease < self.limit:  # one cut per window, not one per slow episode
            return "hold"
        self.limit = max(self.min_limit, self.limit / 2)
        self._since_decrease = 0
        self.decreases += 1
        if self._latency_ewma is not None and self._latency_floor is not None:
            # Let the floor drift up slowly so a permanently slower endpoint is not a permanent cut.
            self._latency_floor = 0.97 * self._latency_floor + 0.03 * self._latency_ewma
        return "decrease"

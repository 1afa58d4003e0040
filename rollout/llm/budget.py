"""One LLM budget for a whole job: requests/min, tokens/min and concurrent calls across all workers.

Every LLM call a worker makes (the real agents' and the teacher's through `OpenAIChatClient`,
the simulated world's waits) goes through the process-wide `LLMGate` (`llm_gate()`):

    async with llm_gate().call(estimated_tokens) as call:
        reply = ...                       # the request itself
        call.tokens = reply.tokens_in + reply.tokens_out    # corrects the estimate afterwards

Without limits the gate only counts (calls in flight, requests, tokens, 429s: the live panel).
With limits it draws from a `BudgetCoordinator`: one Ray actor for the job (or an in-process
object), a token bucket for requests and one for tokens plus a pool of concurrency slots. A
worker leases in batches: every call waiting in the worker when a lease goes out is covered by
that one round trip, plus a small prefetch, so a call pays no round trip of its own when the
local pool has some left. Token leases go by estimates; the difference to the real count is
settled with the next lease (the bucket may go into debt). A 429 anywhere halves the rate the
coordinator hands out to every worker (at most once per `cut_interval_s`) and honours
Retry-After job-wide; the rate then recovers additively.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from solvers.errors import InfraError, InputError

log = logging.getLogger(__name__)
COORDINATOR_TIMEOUT_S = 60.0  # a budget coordinator silent this long fails the calls waiting on it


class BudgetError(InputError, ValueError):
    pass


class BudgetUnavailable(InfraError):
    """The job's budget coordinator stopped answering: the calls waiting for budget cannot go on."""

    kind = "llm_budget"


@dataclass(frozen=True)
class BudgetLimits:
    rpm: float | None = None  # requests per minute, whole job
    tpm: float | None = None  # tokens (prompt + completion) per minute, whole job
    concurrency: int | None = None  # LLM calls in flight at once, whole job

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm", "concurrency"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise BudgetError(f"--llm-{name} must be a positive number, got {value!r}")

    @property
    def enabled(self) -> bool:
        return any(v is not None for v in (self.rpm, self.tpm, self.concurrency))


@dataclass
class _Bucket:
    rate: float  # units per second at full speed
    capacity: float
    level: float = 0.0
    stamp: float = field(default_factory=time.monotonic)

    def refill(self, now: float, factor: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate * factor)
        self.stamp = now


@dataclass
class Lease:
    requests: int = 0
    tokens: float = 0.0
    slots: int = 0
    paused_s: float = 0.0  # the job is paused after a 429 with Retry-After: ask again after this
    over: int = 0  # slots the worker holds beyond its share while others wait: return as calls end


class BudgetCoordinator:
    """The job's budget. Used as a Ray actor (`ray.remote(num_cpus=0)(BudgetCoordinator)`) or in-process."""

    def __init__(self, limits: BudgetLimits, *, burst_s: float = 1.0, cut_interval_s: float = 2.0,
                 recovery_per_s: float = 0.05, min_factor: float = 0.05) -> None:
        self.limits = limits
        now = time.monotonic()
        # Buckets start with one burst in them; a burst is `burst_s` worth of the rate, so the
        # job never sends faster than the limit over any window longer than that.
        self._req = (_Bucket(limits.rpm / 60.0, max(1.0, limits.rpm / 60.0 * burst_s), stamp=now)
                     if limits.rpm else None)
        self._tok = (_Bucket(limits.tpm / 60.0, max(1.0, limits.tpm / 60.0 * burst_s), stamp=now)
                     if limits.tpm else None)
        for bucket in (self._req, self._tok):
            if bucket is not None:
                bucket.level = bucket.capacity
        self._free_slots = limits.concurrency
        self.cut_interval_s = cut_interval_s
        self.recovery_per_s = recovery_per_s
        self.min_factor = min_factor
        self.factor = 1.0  # multiplier on both rates: halved by a 429, recovers additively
        self._factor_stamp = now
        self._last_cut = -1e9
        self._paused_until = 0.0
        self.granted_requests = 0
        self.granted_tokens = 0.0
        self.rate_limited_reports = 0
        self.cuts = 0
        self._held: dict[str, int] = {}  # worker -> slots it holds
        self._wanting: dict[str, float] = {}  # worker -> when it last asked for slots and got fewer

    def _advance(self, now: float) -> None:
        if self.factor < 1.0:
            self.factor = min(1.0, self.factor + (now - self._factor_stamp) * self.recovery_per_s)
        self._factor_stamp = now
        for bucket in (self._req, self._tok):
            if bucket is not None:
                bucket.refill(now, self.factor)

    def lease(self, worker: str, requests: int, tokens: float, slots: int, *, give_back_slots: int = 0,
              token_correction: float = 0.0) -> Lease:
        """Grant up to `requests` calls (with `tokens` estimated tokens and `slots` concurrency slots)."""
        now = time.monotonic()
        self._advance(now)
        if give_back_slots:
            self.give_back(worker, give_back_slots, 0.0)
        if self._tok is not None and token_correction:
            self._tok.level -= token_correction
        if now < self._paused_until:
            return Lease(paused_s=self._paused_until - now)
        n = max(0, requests)
        if self._req is not None:
            n = min(n, int(self._req.level))
        if self._tok is not None and self._tok.level <= 0:
            n = 0
        got_slots = over = 0
        if self._free_slots is not None:
            got_slots = min(max(0, slots), self._free_slots)
            self._free_slots -= got_slots
            held = self._held[worker] = self._held.get(worker, 0) + got_slots
            if got_slots < slots:
                self._wanting[worker] = now
            else:
                self._wanting.pop(worker, None)
            # Another worker waits for slots and this one holds more than its share: it returns the
            # excess as its calls finish, so no worker starves while one keeps reusing its slots.
            starving = [w for w, t in self._wanting.items() if w != worker and now - t < 1.0]
            if starving:
                share = -(-self.limits.concurrency // len({worker, *starving, *self._holders()}))
                over = max(0, held - share)
        if n <= 0:
            return Lease(slots=got_slots, over=over)
        per_request = tokens / max(1, requests)
        granted_tokens = per_request * n
        if self._req is not None:
            self._req.level -= n
        if self._tok is not None:
            self._tok.level -= granted_tokens
        self.granted_requests += n
        self.granted_tokens += granted_tokens
        return Lease(requests=n, tokens=granted_tokens, slots=got_slots, over=over)

    def _holders(self) -> set[str]:
        return {w for w, held in self._held.items() if held > 0}

    def give_back(self, worker: str, slots: int, token_correction: float) -> None:
        if self._tok is not None and token_correction:
            self._tok.level -= token_correction
        if self._free_slots is not None and slots:
            slots = min(slots, self._held.get(worker, 0))
            self._held[worker] = self._held.get(worker, 0) - slots
            self._free_slots += slots

    def forget_worker(self, worker: str) -> None:
        """A worker died: its slots come back (its calls died with it)."""
        self.give_back(worker, self._held.get(worker, 0), 0.0)

    def rate_limited(self, retry_after_s: float | None = None) -> None:
        """Some worker got a 429: slow the whole job down."""
        now = time.monotonic()
        self._advance(now)
        self.rate_limited_reports += 1
        if retry_after_s:
            self._paused_until = max(self._paused_until, now + min(retry_after_s, 60.0))
        if now - self._last_cut >= self.cut_interval_s:
            self._last_cut = now
            self.factor = max(self.min_factor, self.factor / 2)
            self.cuts += 1
            for bucket in (self._req, self._tok):  # what the buckets hold was sized for the old rate
                if bucket is not None:
                    bucket.level = min(bucket.level, bucket.capacity * self.factor)

    def stats(self) -> dict[str, Any]:
        return {"granted_requests": self.granted_requests, "granted_tokens": self.granted_tokens,
                "rate_limited_reports": self.rate_limited_reports, "cuts": self.cuts, "factor": self.factor,
                "free_slots": self._free_slots}

    def ping(self) -> bool:
        return True


class _Remote:
    """Calls a coordinator actor's methods; or a plain in-process coordinator, the same way."""

    def __init__(self, coordinator: Any) -> None:
        self._c = coordinator
        self._is_actor = hasattr(getattr(coordinator, "lease", None), "remote")

    async def lease(self, *args: Any, **kwargs: Any) -> Lease:
        if self._is_actor:
            return await self._c.lease.remote(*args, **kwargs)
        return self._c.lease(*args, **kwargs)

    def fire(self, method: str, *args: Any) -> None:
        if self._is_actor:
            getattr(self._c, method).remote(*args)
        else:
            getattr(self._c, method)(*args)


@dataclass
class CallHandle:
    estimate: float
    tokens: float | None = None  # the real count, set by the caller after the reply


@dataclass
class GateStats:
    in_flight: int = 0
    waiting: int = 0  # calls waiting for the budget
    requests: int = 0
    tokens: float = 0.0
    rate_limited: int = 0  # 429s seen
    coordinator_errors: int = 0  # lease calls to the budget coordinator that failed

    def snapshot(self) -> dict[str, float]:
        return {"llm_in_flight": self.in_flight, "llm_waiting": self.waiting, "llm_requests": self.requests,
                "llm_tokens": self.tokens, "llm_429": self.rate_limited}


class LLMGate:
    """A worker's door to the job's LLM budget (see the module doc). One per process: `llm_gate()`."""

    def __init__(self, coordinator: Any = None, limits: BudgetLimits | None = None, *, worker: str = "",
                 prefetch: int = 2, coordinator_timeout_s: float = COORDINATOR_TIMEOUT_S) -> None:
        self.coordinator_timeout_s = coordinator_timeout_s
        self._remote = _Remote(coordinator) if coordinator is not None else None
        self.limits = limits or BudgetLimits()
        self._slot_limit = self._remote is not None and self.limits.concurrency is not None
        self.worker = worker or f"pid-{id(self)}"
        self.prefetch = prefetch
        self.stats = GateStats()
        self._requests = 0  # leased, not used yet
        self._slots = 0  # leased, not in use
        self._slots_used = 0
        self._owe = 0  # slots to hand back instead of reusing (the coordinator asked)
        self._correction = 0.0  # real tokens minus estimates, not yet reported
        self._waiters: deque[tuple[float, asyncio.Future[None]]] = deque()
        self._refiller: asyncio.Task[None] | None = None
        self._returner: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def limited(self) -> bool:
        return self._remote is not None

    @contextlib.asynccontextmanager
    async def call(self, estimated_tokens: float = 0.0) -> AsyncIterator[CallHandle]:
        handle = CallHandle(estimated_tokens)
        if self._remote is not None:
            await self._acquire(estimated_tokens)
        self.stats.in_flight += 1
        self.stats.requests += 1
        try:
            yield handle
        finally:
            self.stats.in_flight -= 1
            real = handle.tokens if handle.tokens is not None else estimated_tokens
            self.stats.tokens += real
            if self._remote is not None:
                self._correction += real - estimated_tokens
                self._release_slot()

    def rate_limited(self, retry_after_s: float | None = None) -> None:
        """The caller got a 429: the whole job slows down (and this worker drops what it prefetched)."""
        self.stats.rate_limited += 1
        if self._remote is not None:
            self._requests = 0
            self._remote.fire("rate_limited", retry_after_s)

    # ---- budget ---------------------------------------------------------------------------

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop: tasks and futures of the old one are void
            self._loop = loop
            self._waiters.clear()
            self._refiller = self._returner = None

    def _can_take(self) -> bool:
        # Tokens are settled by the coordinator (it grants no request while its token bucket is
        # in debt), so a leased request is enough here; a slot too when concurrency is limited.
        return self._requests > 0 and (self._slots > 0 or not self._slot_limit)

    def _take(self) -> None:
        self._requests -= 1
        if self._slot_limit:
            self._slots -= 1
            self._slots_used += 1

    async def _acquire(self, estimate: float) -> None:
        self._bind()
        if not self._waiters and self._can_take():
            self._take()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((estimate, future))
        self.stats.waiting += 1
        self._ensure_refiller()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._untake()  # granted just as it was cancelled: hand it back
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove((estimate, future))
            raise
        finally:
            self.stats.waiting -= 1

    def _untake(self) -> None:
        self._requests += 1
        if self._slot_limit:
            self._slots += 1
            self._slots_used -= 1

    def _wake(self) -> None:
        while self._waiters and self._can_take():
            _, future = self._waiters.popleft()
            if future.done():
                continue
            self._take()
            future.set_result(None)

    def _ensure_refiller(self) -> None:
        if self._refiller is None or self._refiller.done():
            self._refiller = asyncio.get_running_loop().create_task(self._refill())

    async def _refill(self) -> None:
        assert self._remote is not None
        idle_sleep = 0.01
        failing_since: float | None = None
        while self._waiters:
            need = len(self._waiters)
            want_requests = max(0, need + self.prefetch - self._requests)
            est = sum(e for e, _ in self._waiters) / need
            want_tokens = max(0.0, est * want_requests)
            want_slots = max(0, need - self._slots) if self._slot_limit else 0
            correction, self._correction = self._correction, 0.0
            try:
                lease = await self._remote.lease(self.worker, want_requests, want_tokens, want_slots,
                                                 token_correction=correction)
            except Exception as exc:  # noqa: BLE001  (the coordinator is gone: the job is ending or failing)
                self._correction += correction
                failing_since = failing_since or time.monotonic()
                self.stats.coordinator_errors += 1
                if self._coordinator_failed(exc, time.monotonic() - failing_since):
                    return
                await asyncio.sleep(0.5)
                continue
            failing_since = None
            self._requests += lease.requests
            self._slots += lease.slots
            self._owe = lease.over
            self._wake()
            if lease.paused_s:
                await asyncio.sleep(lease.paused_s)
            elif self._waiters and lease.requests == 0:
                await asyncio.sleep(idle_sleep)  # the buckets are empty: they refill with time
                idle_sleep = min(0.1, idle_sleep * 2)
            else:
                idle_sleep = 0.01

    def _coordinator_failed(self, exc: Exception, failing_for_s: float) -> bool:
        """Log a failed lease call (the first, and past the timeout); past the timeout, fail every
        waiting call with BudgetUnavailable and answer True."""
        if self.stats.coordinator_errors == 1 or failing_for_s >= self.coordinator_timeout_s:
            log.warning("LLM budget coordinator: lease failed (%s: %s), failing for %.0fs", type(exc).__name__,
                        exc, failing_for_s)
        if failing_for_s < self.coordinator_timeout_s:
            return False
        failure = BudgetUnavailable(f"the job's LLM budget coordinator did not answer for {failing_for_s:.0f}s "
                                    f"(last error: {type(exc).__name__}: {exc})")
        while self._waiters:
            _, future = self._waiters.popleft()
            if not future.done():
                future.set_exception(failure)
        return True

    def _release_slot(self) -> None:
        if not self._slot_limit:
            return
        self._slots_used -= 1
        if self._owe > 0 and self._remote is not None:
            self._owe -= 1
            correction, self._correction = self._correction, 0.0
            self._remote.fire("give_back", self.worker, 1, correction)
            return
        self._slots += 1
        self._wake()
        if not self._waiters and self._slots > 0 and (self._returner is None or self._returner.done()):
            with contextlib.suppress(RuntimeError):
                self._returner = asyncio.get_running_loop().create_task(self._return_slots())

    async def _return_slots(self) -> None:
        """Slots idle here are needed elsewhere: hand them back, batched over a short moment."""
        await asyncio.sleep(0.02)
        if self._waiters or self._slots <= 0 or self._remote is None:
            return
        slots, self._slots = self._slots, 0
        correction, self._correction = self._correction, 0.0
        self._remote.fire("give_back", self.worker, slots, correction)


_GATE = LLMGate()


def llm_gate() -> LLMGate:
    """The process-wide gate every LLM call goes through (a counting-only gate unless installed)."""
    return _GATE


def install_gate(gate: LLMGate) -> LLMGate:
    global _GATE
    _GATE = gate
    return gate


def estimate_tokens(messages: list[dict[str, str]], max_tokens: int | None = None,
                    expected_completion: int = 800) -> int:
    """Tokens a request will cost before it is sent: ~4 characters per prompt token, plus the reply."""
    chars = sum(len(str(m.get("content", ""))) for m in messages)
    return chars // 4 + 4 * len(messages) + (max_tokens if max_tokens is not None else expected_completion)


__all__ = ["BudgetCoordinator", "BudgetError", "BudgetLimits", "CallHandle", "LLMGate", "Lease", "estimate_tokens",
           "install_gate", "llm_gate"]

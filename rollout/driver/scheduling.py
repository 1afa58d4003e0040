"""Which episodes go to which worker: the queues (pending, suspects), the Ray calls in flight,
batch sizes, suspects run alone, and tail backups (copies of the last episodes in flight,
sent to idle workers; the first copy to finish wins).

It only moves episodes between queues and calls; what a failure costs a task is
`quarantine.py`'s concern, and the workers' life cycle `actors.py`'s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rollout.driver.actors import Slot
from rollout.driver.plan import EpisodeSpec

MAX_AUTO_BATCH = 4  # the most episodes per Ray call when episodes_per_call is not set, up to a window of 128
MAX_BIG_BATCH = 64  # ... for larger windows: a thirty-second of the window, so calls in flight stay ~32


@dataclass
class Schedule:
    """The episodes of one session, wherever they are."""

    pending: deque[EpisodeSpec] = field(default_factory=deque)
    suspects: deque[EpisodeSpec] = field(default_factory=deque)  # re-run alone: their worker died
    in_flight: dict[Any, tuple[list[EpisodeSpec], Slot]] = field(default_factory=dict)  # one Ray call each
    copies: dict[str, int] = field(default_factory=dict)  # episode ID -> copies in flight
    done: set[str] = field(default_factory=set)  # episode IDs accepted in this session

    def unfinished(self) -> bool:
        """Episodes in flight that no copy has finished (losing tail backups are not waited for)."""
        return any(spec.episode_id not in self.done for specs, _ in self.in_flight.values() for spec in specs)

    def settled(self, spec: EpisodeSpec) -> bool:
        """True when this copy's failure does not count: the episode is done, or another copy runs."""
        return spec.episode_id in self.done or self.copies.get(spec.episode_id, 0) > 0

    def release(self, ref: Any) -> None:
        """A call that returned (or failed): its episodes are no longer in flight."""
        specs, slot = self.in_flight.pop(ref)
        slot.in_flight -= len(specs)
        self._forget_copies(specs)
        if slot.solo and slot.in_flight == 0:
            slot.solo = False

    def lost_with(self, slot: Slot) -> list[EpisodeSpec]:
        """The episodes in flight on a worker that died, taken out of flight."""
        refs = [ref for ref, (_, s) in self.in_flight.items() if s is slot]
        lost = [spec for ref in refs for spec in self.in_flight.pop(ref)[0]]
        self._forget_copies(lost)
        return lost

    def _forget_copies(self, specs: list[EpisodeSpec]) -> None:
        for spec in specs:
            left = self.copies.get(spec.episode_id, 0) - 1
            if left > 0:
                self.copies[spec.episode_id] = left
            else:
                self.copies.pop(spec.episode_id, None)


class Dispatcher:
    """Fills each ready worker's window from the schedule; `skip(spec)` drops an episode whose
    task is quarantined (the caller counts it)."""

    def __init__(self, schedule: Schedule, *, skip: Callable[[EpisodeSpec], bool], episodes_per_call: int | None,
                 backup_tail: bool, max_backups_per_call: int) -> None:
        self.schedule = schedule
        self.skip = skip
        self.episodes_per_call = episodes_per_call
        self.backup_tail = backup_tail
        self.max_backups_per_call = max_backups_per_call
        self.backups = 0  # tail copies started

    def dispatch(self, slots: list[Slot]) -> None:
        state = self.schedule
        for slot in slots:
            if slot.dead or slot.solo or not slot.ready:
                continue
            if state.suspects and slot.in_flight == 0:
                spec = self._next(state.suspects)
                if spec is not None:
                    slot.solo = True
                    self._send([spec], slot)
                continue
            while state.pending and slot.in_flight < slot.window.size:
                batch = []
                room = min(self._batch_size(slot), slot.window.size - slot.in_flight)
                while len(batch) < room and (spec := self._next(state.pending)) is not None:
                    batch.append(spec)
                if not batch:
                    break
                self._send(batch, slot)
        if self.backup_tail and not state.pending and not state.suspects:
            self._dispatch_backups(slots)

    def _dispatch_backups(self, slots: list[Slot]) -> None:
        state = self.schedule
        idle = [slot for slot in slots if slot.ready and not slot.dead and not slot.solo and slot.in_flight == 0]
        if not idle:
            return
        # Newest first: they started last, so they are likely to finish last. An episode already
        # done may still sit in a batch whose call has not returned: it needs no copy.
        candidates = [spec for specs, slot in reversed(state.in_flight.values()) if not slot.solo
                      for spec in reversed(specs)
                      if state.copies.get(spec.episode_id) == 1 and spec.episode_id not in state.done]
        per_call = self.max_backups_per_call
        for slot in idle:
            batch, candidates = candidates[:per_call], candidates[per_call:]
            if not batch:
                return
            self.backups += len(batch)
            self._send(batch, slot)

    def _batch_size(self, slot: Slot) -> int:
        if self.episodes_per_call is not None:
            return self.episodes_per_call
        size = slot.window.size
        return max(1, min(MAX_AUTO_BATCH, size // 2), min(MAX_BIG_BATCH, size // 32))

    def _next(self, queue: deque[EpisodeSpec]) -> EpisodeSpec | None:
        while queue:
            spec = queue.popleft()
            if self.skip(spec):
                continue
            return spec
        return None

    def _send(self, specs: list[EpisodeSpec], slot: Slot) -> None:
        state = self.schedule
        ref = slot.actor.run_batch.remote(specs)
        state.in_flight[ref] = (specs, slot)
        slot.in_flight += len(specs)
        for spec in specs:
            state.copies[spec.episode_id] = state.copies.get(spec.episode_id, 0) + 1

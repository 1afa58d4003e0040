"""Which episodes go to which worker: the queues (pending, suspects), the episodes out on each
worker, batch sizes, suspects run alone, and tail backups (copies of the last episodes in flight,
sent to idle workers; the first copy to finish wins).

Episodes go to a worker in batches (`RolloutWorker.submit`, one Ray call per batch) and come back
as they finish, through the worker's one results stream (`RolloutWorker.results`, a Ray
streaming generator): an episode is in flight from its submit until its own chunk arrives.

It only moves episodes between queues and workers; what a failure costs a task is
`quarantine.py`'s concern, and the workers' life cycle `actors.py`'s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rollout.driver.actors import Slot
from rollout.driver.episode_set import EpisodeSpec

MAX_AUTO_BATCH = 4  # the most episodes per submit call when episodes_per_call is not set, up to a window of 128
MAX_BIG_BATCH = 64  # ... for larger windows: a thirty-second of the window, so calls in flight stay ~32
TAIL_WINDOWS = 4  # the job's last episodes, in windows, that go longest expected first
MIN_TAIL = 64


@dataclass
class Schedule:
    """The episodes of one session, wherever they are (those out on a worker: its `Slot.out`)."""

    pending: deque[EpisodeSpec] = field(default_factory=deque)
    suspects: deque[EpisodeSpec] = field(default_factory=deque)  # re-run alone: their worker died
    submits: dict[Any, tuple[list[EpisodeSpec], Slot]] = field(default_factory=dict)  # submit calls not answered
    copies: dict[str, int] = field(default_factory=dict)  # episode ID -> copies in flight
    done: set[str] = field(default_factory=set)  # episode IDs accepted in this session
    sent: int = 0  # episodes submitted so far (orders them: newest first for tail backups)

    def unfinished(self, slots: list[Slot]) -> bool:
        """Episodes in flight that no copy has finished (losing tail backups are not waited for)."""
        return any(episode_id not in self.done for slot in slots if not slot.dead for episode_id in slot.out)

    def settled(self, spec: EpisodeSpec) -> bool:
        """True when this copy's failure does not count: the episode is done, or another copy runs."""
        return spec.episode_id in self.done or self.copies.get(spec.episode_id, 0) > 0

    def send(self, specs: list[EpisodeSpec], slot: Slot) -> None:
        ref = slot.actor.submit.remote(specs)
        self.submits[ref] = (specs, slot)
        for spec in specs:
            slot.out[spec.episode_id] = (self.sent, spec)
            self.sent += 1
            self.copies[spec.episode_id] = self.copies.get(spec.episode_id, 0) + 1

    def reported(self, slot: Slot, episode_ids: list[str]) -> list[EpisodeSpec]:
        """A chunk of the worker's results came back: these episodes are no longer in flight there
        (returns the specs of those it had; a chunk from a worker already written off has none)."""
        back = [slot.out.pop(episode_id)[1] for episode_id in episode_ids if episode_id in slot.out]
        self._forget_copies(back)
        if slot.solo and not slot.out:
            slot.solo = False
        return back

    def lost_with(self, slot: Slot) -> list[EpisodeSpec]:
        """The episodes in flight on a worker that died, taken out of flight."""
        lost = [spec for _, spec in sorted(slot.out.values(), key=lambda item: item[0])]
        slot.out.clear()
        for ref in [ref for ref, (_, s) in self.submits.items() if s is slot]:
            del self.submits[ref]
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
                 backup_tail: bool, max_backups_per_call: int,
                 expected: Callable[[EpisodeSpec], float] | None = None) -> None:
        self.schedule = schedule
        self.skip = skip
        self.episodes_per_call = episodes_per_call
        self.backup_tail = backup_tail
        self.max_backups_per_call = max_backups_per_call
        self.expected = expected  # an episode's expected length (its task's record in this job)
        self.backups = 0  # tail copies started
        self.tail_sorted = 0  # episodes put longest-first for the job's end (0: not yet)

    def dispatch(self, slots: list[Slot]) -> None:
        state = self.schedule
        if self.expected is not None and not self.tail_sorted and state.pending:
            self._sort_tail(slots, self.expected)
        for slot in slots:
            if slot.dead or slot.solo or not slot.ready:
                continue
            if state.suspects and slot.in_flight == 0:
                spec = self._next(state.suspects)
                if spec is not None:
                    slot.solo = True
                    state.send([spec], slot)
                continue
            while state.pending and slot.in_flight < slot.window.size:
                batch = []
                room = min(self._batch_size(slot), slot.window.size - slot.in_flight)
                while len(batch) < room and (spec := self._next(state.pending)) is not None:
                    batch.append(spec)
                if not batch:
                    break
                state.send(batch, slot)
        if self.backup_tail and not state.pending and not state.suspects:
            self._dispatch_backups(slots)

    def _sort_tail(self, slots: list[Slot], expected: Callable[[EpisodeSpec], float]) -> None:
        """Longest expected first over the job's last episodes: the job ends when its last long
        episode does, and one started last runs on alone while the CPUs idle. With LLM latencies
        an episode's length is mostly its steps (each waits on the LLM); a task's episodes so far in
        this job predict it in part (docs/results/2026-12-03-rollout-llm-bound.md). Done once, when
        what is left is about four windows, so the longest of it starts about four episode
        lengths before the end."""
        horizon = TAIL_WINDOWS * sum(slot.window.size for slot in slots if not slot.dead)
        state = self.schedule
        # ... and once more episodes have finished than are left: guesses from a fair sample
        if len(state.pending) > max(horizon, MIN_TAIL) or len(state.done) < len(state.pending):
            return
        state.pending = deque(sorted(state.pending, key=expected, reverse=True))  # stable: ties keep order
        self.tail_sorted = len(state.pending)

    def _dispatch_backups(self, slots: list[Slot]) -> None:
        state = self.schedule
        idle = [slot for slot in slots if slot.ready and not slot.dead and not slot.solo and slot.in_flight == 0]
        if not idle:
            return
        # Newest first: they started last, so they are likely to finish last.
        out = sorted((item for slot in slots if not slot.dead and not slot.solo for item in slot.out.values()),
                     key=lambda item: -item[0])
        candidates = [spec for _, spec in out
                      if state.copies.get(spec.episode_id) == 1 and spec.episode_id not in state.done]
        per_call = self.max_backups_per_call
        for slot in idle:
            batch, candidates = candidates[:per_call], candidates[per_call:]
            if not batch:
                return
            self.backups += len(batch)
            state.send(batch, slot)

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

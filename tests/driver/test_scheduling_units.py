"""The rollout job's strike accounting and dispatch policy, each on its own: `Quarantine`
without Ray, `Dispatcher`/`Schedule` against real (tiny) Ray actors started in process."""

from __future__ import annotations

from collections import deque

import pytest
import ray

from rollout.driver.actors import Slot
from rollout.driver.aimd import AIMDWindow
from rollout.driver.episode_set import EpisodeSpec
from rollout.driver.quarantine import Quarantine, Strike
from rollout.driver.scheduling import Dispatcher, Schedule
from rollout.store import QuarantinedTask


def _spec(i: int, task: str = "t") -> EpisodeSpec:
    return EpisodeSpec(f"ep-{i}", 0, task, i)


def test_strikes_quarantine_a_task_at_max_attempts_and_drop_it_afterwards() -> None:
    q = Quarantine(max_attempts=3)
    assert [q.strike("a", f"boom {i}") for i in range(3)] == [Strike.RETRY, Strike.RETRY, Strike.QUARANTINED]
    assert q.strike("a", "late") is Strike.DROPPED  # an episode in flight when it was quarantined
    assert q.holds("a") and not q.holds("b")
    assert q.strike("b", "once") is Strike.RETRY
    assert q.tasks() == [QuarantinedTask("a", "boom 2", 3)]


def test_a_resumed_run_restores_the_quarantine_it_recorded() -> None:
    q = Quarantine(max_attempts=3)
    q.restore([QuarantinedTask("a", "died", 3)])
    assert q.holds("a")
    assert q.strike("a", "again") is Strike.DROPPED
    assert q.tasks() == [QuarantinedTask("a", "died", 3)]


@ray.remote(num_cpus=0)
class _Echo:
    def submit(self, specs: list[EpisodeSpec]) -> list[str]:
        return [s.episode_id for s in specs]


@pytest.fixture(scope="module")
def actors():
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield [_Echo.remote() for _ in range(2)]
    ray.shutdown()


def _slots(actors, window: int) -> list[Slot]:
    return [Slot(i, a, AIMDWindow(limit=float(window)), ready=True) for i, a in enumerate(actors)]


def _sent(schedule: Schedule) -> dict[int, list[list[str]]]:
    """The submit calls since the last look (what the job loop would collect)."""
    out: dict[int, list[list[str]]] = {}
    for ref, (specs, slot) in list(schedule.submits.items()):
        del schedule.submits[ref]
        assert ray.get(ref) == [s.episode_id for s in specs]  # the actor got exactly this batch
        out.setdefault(slot.index, []).append([s.episode_id for s in specs])
    return out


def test_windows_fill_in_batches_and_quarantined_tasks_are_skipped(actors) -> None:
    schedule = Schedule(pending=deque([_spec(0, "bad"), *(_spec(i) for i in range(1, 10))]))
    skipped: list[str] = []

    def skip(spec: EpisodeSpec) -> bool:
        if spec.task_id == "bad":
            skipped.append(spec.episode_id)
            return True
        return False

    dispatcher = Dispatcher(schedule, skip=skip, episodes_per_call=None, backup_tail=True, max_backups_per_call=2)
    slots = _slots(actors, window=4)
    dispatcher.dispatch(slots)
    # a window of 4 goes out as two calls of 2 (half the window); the quarantined task's episode is skipped
    assert _sent(schedule) == {0: [["ep-1", "ep-2"], ["ep-3", "ep-4"]], 1: [["ep-5", "ep-6"], ["ep-7", "ep-8"]]}
    assert skipped == ["ep-0"] and [s.episode_id for s in schedule.pending] == ["ep-9"]
    assert [s.in_flight for s in slots] == [4, 4]
    assert [s.episode_id for s in schedule.reported(slots[0], ["ep-1", "ep-2", "ep-9"])] == ["ep-1", "ep-2"]
    assert slots[0].in_flight == 2 and not schedule.settled(_spec(1))


def test_a_suspect_runs_alone_and_idle_workers_back_up_the_tail(actors) -> None:
    schedule = Schedule(suspects=deque([_spec(0)]), pending=deque([_spec(1), _spec(2), _spec(3)]))
    dispatcher = Dispatcher(schedule, skip=lambda s: False, episodes_per_call=3, backup_tail=True,
                            max_backups_per_call=2)
    slots = _slots(actors, window=8)
    dispatcher.dispatch(slots)
    assert _sent(schedule) == {0: [["ep-0"]], 1: [["ep-1", "ep-2", "ep-3"]]}
    assert slots[0].solo
    schedule.reported(slots[0], ["ep-0"])
    schedule.done.add("ep-0")
    assert not slots[0].solo
    dispatcher.dispatch(slots)  # nothing pending: the idle worker gets copies of the newest two
    assert _sent(schedule)[0] == [["ep-3", "ep-2"]] and dispatcher.backups == 2
    assert schedule.copies == {"ep-1": 1, "ep-2": 2, "ep-3": 2}
    assert schedule.settled(_spec(2))  # a failure of one copy does not count while the other runs
    lost = schedule.lost_with(slots[1])
    assert [s.episode_id for s in lost] == ["ep-1", "ep-2", "ep-3"]
    assert schedule.copies == {"ep-2": 1, "ep-3": 1} and schedule.unfinished(slots)


def test_episodes_leave_flight_chunk_by_chunk_in_any_order(actors) -> None:
    schedule = Schedule(pending=deque(_spec(i) for i in range(4)))
    dispatcher = Dispatcher(schedule, skip=lambda s: False, episodes_per_call=4, backup_tail=True,
                            max_backups_per_call=2)
    slots = _slots(actors[:1], window=4)
    dispatcher.dispatch(slots)
    assert _sent(schedule) == {0: [["ep-0", "ep-1", "ep-2", "ep-3"]]}
    schedule.reported(slots[0], ["ep-2", "ep-0"])  # a first chunk: two of the batch finished
    assert slots[0].in_flight == 2 and list(slots[0].out) == ["ep-1", "ep-3"]
    assert schedule.copies == {"ep-1": 1, "ep-3": 1} and schedule.unfinished(slots)
    dispatcher.dispatch(slots)  # room for two, nothing pending, the worker is not idle: no backups
    assert dispatcher.backups == 0 and not schedule.submits
    schedule.reported(slots[0], ["ep-3", "ep-1"])
    assert slots[0].in_flight == 0 and schedule.copies == {} and not schedule.unfinished(slots)


def test_the_job_s_last_episodes_go_longest_expected_first(actors) -> None:
    """Near the end (what is left fits in a few windows, at least 64, and more has finished than
    is left) the pending episodes go in order of their task's expected length; before, plan order."""
    schedule = Schedule(pending=deque([_spec(i, "slow" if i % 3 == 0 else "quick") for i in range(90)]))
    dispatcher = Dispatcher(schedule, skip=lambda s: False, episodes_per_call=4, backup_tail=False,
                            max_backups_per_call=2, expected=lambda s: 10.0 if s.task_id == "slow" else 2.0)
    slots = _slots(actors[:1], window=4)

    def round_trip() -> list[str]:
        dispatcher.dispatch(slots)
        sent = [i for batch in _sent(schedule).get(0, []) for i in batch]
        schedule.reported(slots[0], sent)
        schedule.done.update(sent)
        return sent

    assert round_trip() == ["ep-0", "ep-1", "ep-2", "ep-3"]  # 90 left: plan order
    while len(schedule.pending) > 60:
        round_trip()
    assert not dispatcher.tail_sorted  # few enough left, but fewer finished than left
    schedule.done.update(f"earlier-{i}" for i in range(60))
    before = [s.episode_id for s in schedule.pending]
    sent = round_trip()
    assert dispatcher.tail_sorted == len(before) == 58
    assert sent == [i for i in before if int(i[3:]) % 3 == 0][:4]  # the slow ones first, in plan order
    left = [s.task_id for s in schedule.pending]
    assert left == sorted(left, key=lambda t: t != "slow")  # all slow before any quick, plan order within

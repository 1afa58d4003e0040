"""Strike and quarantine accounting: each failure of a task's episode is a strike; at
`max_attempts` strikes the task is quarantined (its remaining episodes are dropped, its last
error is kept for the run metadata). A resumed run restores an earlier session's quarantine.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from rollout.store import QuarantinedTask

log = logging.getLogger(__name__)


class Strike(enum.Enum):
    RETRY = "retry"  # run the episode again
    QUARANTINED = "quarantined"  # this strike quarantined the task; drop the episode
    DROPPED = "dropped"  # the task was already quarantined; drop the episode


@dataclass
class TaskFaults:
    strikes: int = 0
    last_error: str = ""
    quarantined: bool = False


class Quarantine:
    def __init__(self, max_attempts: int) -> None:
        self.max_attempts = max_attempts
        self.faults: dict[str, TaskFaults] = {}

    def strike(self, task_id: str, error: str) -> Strike:
        faults = self.faults.setdefault(task_id, TaskFaults())
        if faults.quarantined:  # an episode of it was already in flight when it was quarantined
            return Strike.DROPPED
        faults.strikes += 1
        faults.last_error = error
        if faults.strikes >= self.max_attempts:
            faults.quarantined = True
            log.warning("quarantined task %s after %d failures: %s", task_id, faults.strikes,
                        error.strip().splitlines()[0] if error.strip() else "")
            return Strike.QUARANTINED
        return Strike.RETRY

    def holds(self, task_id: str) -> bool:
        faults = self.faults.get(task_id)
        return bool(faults and faults.quarantined)

    def restore(self, tasks: list[QuarantinedTask]) -> None:
        """The quarantine an earlier session of the run recorded."""
        for q in tasks:
            self.faults[q.task_id] = TaskFaults(strikes=q.attempts, last_error=q.error, quarantined=True)

    def tasks(self) -> list[QuarantinedTask]:
        return [QuarantinedTask(task_id, f.last_error, f.strikes) for task_id, f in self.faults.items()
                if f.quarantined]

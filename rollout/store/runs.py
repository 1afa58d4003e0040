"""Run metadata (one JSON document per run) and the per-run summary `list_runs` returns."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
RUN_STATUSES = ("running", "completed", "interrupted", "failed")


def check_run_id(run_id: str) -> str:
    """Run IDs become partition directory names, so they stay URL- and path-safe."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.match(run_id):
        raise ValueError(f"invalid run ID {run_id!r}: use 1-128 characters from A-Z a-z 0-9 . _ - "
                         f"(starting with a letter or digit)")
    return run_id


@dataclass
class QuarantinedTask:
    task_id: str
    error: str  # the last error seen (traceback tail or "worker died")
    attempts: int


@dataclass
class RunMeta:
    run_id: str
    status: str = "running"  # one of RUN_STATUSES
    config: dict[str, Any] = field(default_factory=dict)  # the job's arguments, as given
    llm_backend: str = ""
    policy: str = ""
    episodes_requested: int = 0
    episodes_committed: int = 0
    episodes_failed: int = 0  # episodes given up on (their task was quarantined)
    quarantined: list[QuarantinedTask] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)  # error category -> count
    message: str = ""  # why the run stopped, when it did not complete
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=1)

    @classmethod
    def from_json(cls, text: str) -> RunMeta:
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        data["quarantined"] = [QuarantinedTask(**q) for q in data.get("quarantined", [])]
        return cls(**data)


@dataclass
class RunInfo:
    """One line of `halo runs`: metadata (when written) joined with counts from the table."""

    run_id: str
    status: str  # RunMeta.status, or "unknown" for data written without run metadata
    episodes: int
    steps: int
    success_validator: float  # fraction of committed episodes
    success_oracle: float | None  # fraction among episodes with a gold answer; None if none has
    llm_backend: str
    policy: str
    episodes_requested: int = 0
    quarantined: int = 0
    created_at: float = 0.0

    @property
    def simulated(self) -> bool:
        return self.llm_backend == "sim"

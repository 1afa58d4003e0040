"""Fault injection for the training tests, through TrainConfig.on_step (production code has no
fault hooks of its own). Imported as tests.train.faults so Ray Train workers, which start in the
repository root, can unpickle it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CrashOnce:
    """A TrainConfig.on_step hook: rank 0 raises once after optimizer step `at_step`; the marker
    file (written first) lets the group Ray restarts go on past that step."""

    marker: Path
    at_step: int

    def __call__(self, global_step: int, rank: int) -> None:
        if rank == 0 and global_step == self.at_step and not self.marker.exists():
            self.marker.parent.mkdir(parents=True, exist_ok=True)
            self.marker.write_text("crashed once on purpose\n")
            raise RuntimeError(f"injected crash at step {global_step}")

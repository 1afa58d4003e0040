"""Resource limits of one planner or validator call."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """timeout_s: wall clock (also the CPU-time limit); memory_mb: address space of the call;
    output_bytes: how much of stdout/stderr is kept (head and tail); file_mb: largest file the
    call may write (the translator's output.sas included)."""

    timeout_s: float = 10.0
    memory_mb: int = 2048
    output_bytes: int = 1_000_000
    file_mb: int = 256

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"Limits.timeout_s must be > 0, got {self.timeout_s!r}")
        if self.memory_mb < 64:
            raise ValueError(f"Limits.memory_mb must be >= 64, got {self.memory_mb!r}")
        if self.output_bytes < 1024 or self.file_mb < 1:
            raise ValueError("Limits.output_bytes must be >= 1024 and file_mb >= 1")

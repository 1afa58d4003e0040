"""Task loaders: PlanBench, IPC-style folders, temporal domains, Natural Plan JSON."""

from rollout.tasks.base import Task

__all__ = ["Task"]

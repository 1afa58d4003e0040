"""Task loaders: PlanBench, IPC-style folders, temporal domains, Natural Plan JSON."""

from rollout.tasks.base import Task
from rollout.tasks.loaders import TaskSpecError, find_task, load_tasks

__all__ = ["Task", "TaskSpecError", "find_task", "load_tasks"]

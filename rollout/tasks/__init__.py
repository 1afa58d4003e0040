"""Task loaders: PlanBench, IPC-style folders, temporal domains, Natural Plan JSON."""

from rollout.tasks.base import Task
from rollout.tasks.loaders import TaskSpec, TaskSpecError, find_task, load_tasks

__all__ = ["Task", "TaskSpec", "TaskSpecError", "find_task", "load_tasks"]

"""The trajectory store (Delta Lake on a local directory or S3). See docs/rollout-job.md."""

from rollout.store.retry import RetryPolicy, StoreError, StoreUnavailable
from rollout.store.runs import QuarantinedTask, RunInfo, RunMeta, check_run_id
from rollout.store.trajectory_store import TrajectoryStore

__all__ = ["QuarantinedTask", "RetryPolicy", "RunInfo", "RunMeta", "StoreError", "StoreUnavailable",
           "TrajectoryStore", "check_run_id"]

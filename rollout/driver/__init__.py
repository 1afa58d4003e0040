"""The Ray rollout job: actors run episodes, one committer writes them to the trajectory store."""

from rollout.driver.job import RolloutConfig, RolloutJob, RolloutSummary, run_rollout

__all__ = ["RolloutConfig", "RolloutJob", "RolloutSummary", "run_rollout"]

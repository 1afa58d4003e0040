"""The Ray rollout job: actors run episodes, one committer writes them to the trajectory store."""

from rollout.driver.config import RolloutConfig
from rollout.driver.job import RolloutJob, run_rollout
from rollout.driver.summary import RolloutSummary

__all__ = ["RolloutConfig", "RolloutJob", "RolloutSummary", "run_rollout"]

"""The decision service's Python client for production planners (sync and async; typed answers).

Defined in rollout/policies/student_client.py, which the student policy also uses (rollout must not import
serve); re-exported here under the service's name.
"""

from rollout.policies.student_client import (
    API_KEY_ENV,
    RETRY_STATUS,
    Answer,
    AsyncDecisionClient,
    DecisionClient,
    DecisionServiceError,
    RetryPolicy,
)
from serve.plan_client import PlanClient, PlanJob

__all__ = ["API_KEY_ENV", "RETRY_STATUS", "Answer", "AsyncDecisionClient", "DecisionClient", "DecisionServiceError",
           "PlanClient", "PlanJob", "RetryPolicy"]

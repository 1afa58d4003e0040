"""The served student as a rollout policy: `student:URL` asks the decision service over HTTP.

Student rollouts thereby take the same path production planners do (rules layer, model, version
reporting all happen in the service). It speaks through rollout/policies/student_client.py (rollout never
imports serve), whose retry rules apply: transport errors, 429 and 5xx are retried with backoff
honouring Retry-After; other 4xx (401, 403, 409, 413, 422) are not retried.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.core.trajectory import FEEDBACK_STEP_FIELDS, EpisodeRecord
from rollout.policies.student_client import (
    Answer,
    AsyncDecisionClient,
    DecisionClient,
    DecisionServiceError,
    RetryPolicy,
)

__all__ = ["StudentHTTPPolicy", "StudentServiceError", "feedback_payload", "student_factory"]

# The student policy's error is the client's: same status, error kind and field.
StudentServiceError = DecisionServiceError


class StudentHTTPPolicy(Policy):
    name = "student"

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 10.0, *,
                 retries: int = 4, backoff_s: float = 0.1, max_backoff_s: float = 5.0, pool: int = 64) -> None:
        self.base_url = base_url.rstrip("/")
        retry = RetryPolicy(retries=retries, initial_backoff_s=backoff_s, max_backoff_s=max_backoff_s)
        self._args = (self.base_url, api_key, timeout, retry)
        self.version = "unknown"  # set from the service's answers
        self._client: DecisionClient | None = None
        # One bounded pool per process: with a thousand episodes in flight, decisions queue for a
        # connection (no pool timeout) instead of opening a thousand sockets or failing.
        self._aclient = AsyncDecisionClient(*self._args, pool=pool)

    def _sync_client(self) -> DecisionClient:
        if self._client is None:
            self._client = DecisionClient(*self._args)
        return self._client

    def _result(self, answer: Answer, t0: float) -> Decision:
        self.version = answer.policy_version or self.version
        # Latency as this client saw it (network included); the service's own time is in the answer.
        return replace(answer.decision(), latency_ms=(time.perf_counter() - t0) * 1000.0)

    # -- Policy -----------------------------------------------------------------------------------

    def decide(self, state: EpisodeState) -> Decision:
        t0 = time.perf_counter()
        return self._result(self._sync_client().decide(state.to_dict()), t0)

    async def adecide(self, state: EpisodeState) -> Decision:
        t0 = time.perf_counter()
        return self._result(await self._aclient.decide(state.to_dict()), t0)

    def send_feedback(self, record: EpisodeRecord) -> dict[str, Any]:
        """POST a finished episode to /v1/feedback (idempotent by episode_id); returns the answer."""
        return self._sync_client().feedback(feedback_payload(record))

    def _decide(self, state: EpisodeState) -> Decision:  # decide() is overridden; kept for the ABC
        return self.decide(state)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        self._aclient.close()


def feedback_payload(record: EpisodeRecord) -> dict[str, Any]:
    """The /v1/feedback body for an episode record (the service rebuilds the record from it)."""
    steps = []
    for step in record.steps:
        row = {name: getattr(step, name) for name in FEEDBACK_STEP_FIELDS}
        row["state"] = json.loads(step.state_json)
        steps.append(row)
    return {"episode_id": record.episode_id, "llm_backend": record.llm_backend,
            "success_validator": record.success_validator, "success_oracle": record.success_oracle,
            "task_id": record.task_id, "family": record.family, "domain_name": record.domain_name,
            "policy_name": record.policy_name, "policy_version": record.policy_version,
            "final_plan": record.final_plan, "natural_language_plan": record.natural_language_plan,
            "seed": record.seed, "wall_s": record.wall_s, "steps": steps}


def student_factory(params: str, seed: int) -> Policy:
    """`student:URL` (e.g. student:http://127.0.0.1:8000); the key comes from HALO_SERVE_API_KEY."""
    url = params.strip()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"student policy needs the service URL, e.g. student:http://127.0.0.1:8000 (got {url!r})")
    return StudentHTTPPolicy(url)

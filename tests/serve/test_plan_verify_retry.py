"""A finished plan job is verified before it is stored as a feedback episode: a validator that
fails to run (its sandbox worker gone) is asked again, VERIFY_RETRY.retries times on the one
RetryPolicy, and only then is the episode stored unverified. The validator is the real one (real sandbox);
only its failures to run are injected, by making the first calls raise the pool's own error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import solvers
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord
from rollout.tasks import load_tasks
from serve.feedback_verify import VERIFIED, VerificationUnavailable
from serve.plan_runner import VERIFY_RETRY, verify_with_retry
from solvers.pool import WorkerGone

TASK_ID = "planbench/blocksworld/instance-3"


def _episode() -> EpisodeRecord:
    """A finished job whose last step holds the task's gold domain, problem and plan."""
    task = next(t for t in load_tasks("bundled") if t.task_id == TASK_ID)
    assert task.gold_domain and task.gold_problem and task.gold_plan
    state = EpisodeState(task_description=task.description, domain=task.gold_domain,
                         problem=task.gold_problem)
    step = StepRecord(step=0, state_json=state.to_json(), agent_id=0, agent_name="planner", decided_by="rules",
                      is_hardcoded=True, plan_after=task.gold_plan, plan_found=True, plan_valid=True)
    return EpisodeRecord(episode_id="k:plan-x", run_id="serve-plans", task_id=TASK_ID, family=task.family,
                         domain_name=task.domain_name, policy_name="served-orchestrator", policy_version="",
                         llm_backend="request", success_validator=True, success_oracle=None, steps=[step],
                         seed=0, final_plan=task.gold_plan)


def _failing_first(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    """solvers.validate fails to run `failures` times (the pool's worker gone), then runs; returns
    the list the attempts are counted in."""
    real, calls = solvers.validate, []

    def validate(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) <= failures:
            raise WorkerGone("solver worker exited mid-call")
        return real(*args, **kwargs)

    monkeypatch.setattr(solvers, "validate", validate)
    return calls


def test_a_validator_that_fails_to_run_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    assert VERIFY_RETRY.retries == 3
    calls = _failing_first(monkeypatch, failures=VERIFY_RETRY.retries)
    check = asyncio.run(verify_with_retry(_episode(), "bundled"))
    # Three failures, then the real validator's verdict (and the oracle's own validation of the plan).
    assert len(calls) == VERIFY_RETRY.retries + 2
    assert check.validator is True and check.oracle is True and check.code == VERIFIED, check.detail


def test_the_episode_is_given_up_after_the_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _failing_first(monkeypatch, failures=10)
    with pytest.raises(VerificationUnavailable, match="validator unavailable: WorkerGone"):
        asyncio.run(verify_with_retry(_episode(), "bundled"))
    assert len(calls) == VERIFY_RETRY.retries + 1  # asked once and again three times, no more


def test_a_plan_the_validator_rejects_is_a_verdict_not_a_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _failing_first(monkeypatch, failures=0)
    episode = _episode()
    episode.steps[0].plan_after = episode.final_plan = "(unstack a a)\n"
    check = asyncio.run(verify_with_retry(episode, "bundled"))
    assert check.validator is False and len(calls) <= 2  # the validator once (and the oracle), no retry


def test_an_unverifiable_finished_job_is_kept_unverified_and_never_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    from cluster.loop.data import feedback_source
    from serve.plan_runner import feedback_episode

    _failing_first(monkeypatch, failures=VERIFY_RETRY.retries + 1)  # every try of the first job
    episode = asyncio.run(feedback_episode(_episode(), "bundled"))
    assert episode.code_version == "serve-feedback:unverified"
    assert feedback_source({"code_version": episode.code_version, "episode_id": episode.episode_id}) is None
    verified = asyncio.run(feedback_episode(_episode(), "bundled"))  # the validator runs again now
    assert verified.code_version == VERIFIED
    assert feedback_source({"code_version": verified.code_version, "episode_id": verified.episode_id}) == "k"

"""Feedback is evidence, not truth: what the service re-checks before it stores an episode.

A client's `success_validator` and `success_oracle` are claims. The service re-runs the validator
(sandboxed) on the episode's final domain, problem and plan, and, when the task_id names a task
it knows (`feedback_tasks`), the oracle on the task's gold PDDL. The stored verdicts are the
service's own; the episode is marked `serve-feedback:verified` only when every claim matches
them, else `serve-feedback:disagrees` (stored, never trusted). The loop trusts nothing else
(cluster/loop/data.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import solvers
from rollout.core.trajectory import EpisodeRecord
from solvers.errors import InfraError

FEEDBACK_CODE = "serve-feedback"
VERIFIED = f"{FEEDBACK_CODE}:verified"
DISAGREES = f"{FEEDBACK_CODE}:disagrees"
# Stored because the validator could not run when it was checked: kept, never trusted (like DISAGREES).
UNVERIFIED = f"{FEEDBACK_CODE}:unverified"
# One validator call per feedback episode: 10 s and 1 GiB at most (the sandbox enforces them).
VERIFY_LIMITS = solvers.Limits(timeout_s=10.0, memory_mb=1024)


class VerificationUnavailable(InfraError, RuntimeError):
    """The validator could not run (an infrastructure failure): nothing is stored, the client retries."""


@dataclass(frozen=True)
class Verification:
    validator: bool
    oracle: bool | None  # None: the task is unknown here, or it has no gold answer
    code: str  # VERIFIED or DISAGREES
    detail: str


def final_artifacts(episode: EpisodeRecord) -> tuple[str, str, str]:
    """(domain, problem, plan) the episode ended with: its last step's output, else its last input."""
    import json

    last = max(episode.steps, key=lambda s: s.step)
    state = json.loads(last.state_json)
    domain = last.domain_after or state.get("domain", "")
    problem = last.problem_after or state.get("problem", "")
    plan = episode.final_plan or last.plan_after or state.get("plan", "")
    return domain, problem, plan


def check_validator(domain: str, problem: str, plan: str) -> tuple[bool, str]:
    if not (domain.strip() and problem.strip() and plan.strip()):
        return False, "no final domain, problem and plan to validate"
    try:
        result = solvers.validate(domain, problem, plan, limits=VERIFY_LIMITS)
    except ValueError as exc:  # input the solvers refuse (too large, not text): not a valid plan
        return False, f"refused by the validator: {str(exc)[:200]}"
    except Exception as exc:
        raise VerificationUnavailable(f"validator unavailable: {type(exc).__name__}") from exc
    return bool(result.valid), f"validator: {result.category.value}"


@functools.lru_cache(maxsize=8)
def _tasks(spec: str) -> dict[str, object]:
    from rollout.tasks import load_tasks

    return {t.task_id: t for t in load_tasks(spec)} if spec else {}


def check_oracle(episode: EpisodeRecord, plan: str, tasks_spec: str) -> tuple[bool | None, str]:
    from rollout.loop.oracle import check_plan

    task = _tasks(tasks_spec).get(episode.task_id)
    if task is None:
        return None, "task unknown to the service: oracle not checked"
    name_map = None
    if episode.llm_backend == "sim":  # the simulated world renames deterministically from (task, seed)
        from rollout.sim.backend import SimAgents

        name_map = SimAgents().world(task, episode.seed).name_map  # type: ignore[arg-type]
    verdict = check_plan(task, plan, name_map=name_map)  # type: ignore[arg-type]
    return verdict.correct, f"oracle ({verdict.method}): {verdict.detail[:200]}"


def verify_episode(episode: EpisodeRecord, tasks_spec: str) -> Verification:
    """The service's verdicts on `episode`; raises VerificationUnavailable when the validator cannot run."""
    domain, problem, plan = final_artifacts(episode)
    valid, v_detail = check_validator(domain, problem, plan)
    oracle, o_detail = check_oracle(episode, plan, tasks_spec)
    # An oracle claim the service cannot check (unknown task) contradicts nothing; what is stored
    # is the service's own verdict (None) either way.
    agrees = episode.success_validator == valid and (None in (episode.success_oracle, oracle)
                                                     or episode.success_oracle == oracle)
    return Verification(valid, oracle, VERIFIED if agrees else DISAGREES, f"{v_detail}; {o_detail}")

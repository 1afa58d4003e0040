"""/v1/feedback: an episode that used the service, turned into an EpisodeRecord and appended to the
trajectory store for the online loop.

All replicas hand episodes to ONE named writer actor: the store commits a run from one process at
a time, and one writer also makes the episode_id de-duplication exact across replicas.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from typing import Any

import ray

from rollout.agent_table import agent_name
from rollout.state import EpisodeState
from rollout.trajectory import EpisodeRecord, StepRecord
from serve.schemas import FeedbackIn

WRITER_NAME = "halo-feedback-writer"


def episode_from_feedback(body: FeedbackIn, run_id: str, served_version: str) -> EpisodeRecord:
    steps = []
    for s in sorted(body.steps, key=lambda s: s.step):
        data = s.model_dump(exclude={"state", "step"})
        state = EpisodeState.from_model(s.state)  # validated with the body (StateIn)
        agent = data.pop("agent_id")
        steps.append(StepRecord(step=s.step, state_json=state.to_json(), agent_id=agent, agent_name=agent_name(agent),
                                is_hardcoded=s.decided_by == "rule", **data))
    return EpisodeRecord(
        episode_id=body.episode_id, run_id=run_id, task_id=body.task_id, family=body.family,
        domain_name=body.domain_name, policy_name=body.policy_name,
        policy_version=body.policy_version or served_version, llm_backend=body.llm_backend,
        success_validator=body.success_validator, success_oracle=body.success_oracle, steps=steps,
        model_version=served_version, seed=body.seed, final_plan=body.final_plan,
        natural_language_plan=body.natural_language_plan,
        total_llm_calls=sum(s.llm_calls for s in steps), total_tokens_in=sum(s.tokens_in for s in steps),
        total_tokens_out=sum(s.tokens_out for s in steps), total_cost_usd=sum(s.cost_usd for s in steps),
        wall_s=body.wall_s, created_at=time.time(), solver_versions=json.dumps({}),
        code_version="serve-feedback")


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class FeedbackWriter:
    def __init__(self, store_url: str) -> None:
        from rollout.store import TrajectoryStore

        self.store = TrajectoryStore(store_url)
        # episode_id -> content fingerprint per run, filled from the store on the first duplicate
        self._seen: dict[str, dict[str, str]] = {}

    def write(self, run_id: str, episode: EpisodeRecord) -> str:
        """"stored"; "duplicate" when this episode_id is already in the run with the same content;
        "conflict" when it is there with different content."""
        if self.store.write_episodes(run_id, [episode]) == 1:
            self._seen.setdefault(run_id, {})[episode.episode_id] = fingerprint(episode)
            return "stored"
        seen = self._seen.get(run_id, {})
        if episode.episode_id not in seen:
            seen = self._seen[run_id] = {e.episode_id: fingerprint(e) for e in self.store.read_episodes([run_id])}
        return "duplicate" if seen.get(episode.episode_id) == fingerprint(episode) else "conflict"


# What the client said about an episode; the service's own stamps (time, served version) are left out.
_SERVICE_FIELDS = frozenset({"created_at", "model_version", "policy_version", "run_id"})


def fingerprint(episode: EpisodeRecord) -> str:
    data = {k: v for k, v in asdict(episode).items() if k not in _SERVICE_FIELDS}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def get_writer(store_url: str, namespace: str) -> Any:
    return FeedbackWriter.options(name=WRITER_NAME, namespace=namespace, lifetime="detached",  # type: ignore[attr-defined]
                                  get_if_exists=True).remote(store_url)

"""/v1/feedback: an episode that used the service, turned into an EpisodeRecord and appended to the
trajectory store for the online loop.

All replicas hand episodes to ONE named writer actor: the store commits a run from one process at
a time, and one writer also makes the episode_id de-duplication and the per-key quotas exact
across replicas. The writer re-verifies each episode (serve/feedback_verify.py), records who sent
it and what it claimed in a provenance document next to the table (`feedback/RUN/*.json`), and
gathers episodes into one commit per `batch_size` or `batch_wait_s`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Any

import ray

from rollout.core.agent_table import agent_name
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord
from serve.feedback_verify import FEEDBACK_CODE, verify_episode
from serve.schemas import FeedbackIn

log = logging.getLogger(__name__)

WRITER_NAME = "halo-feedback-writer"


def episode_from_feedback(body: FeedbackIn, run_id: str, served_version: str, key_name: str) -> EpisodeRecord:
    """The episode as stored: its ID namespaced by the key that sent it; its verdicts still the
    client's claims until FeedbackWriter verifies them."""
    steps = []
    for s in sorted(body.steps, key=lambda s: s.step):
        data = s.model_dump(exclude={"state", "step"})
        state = EpisodeState.from_model(s.state)  # validated with the body (StateIn)
        agent = data.pop("agent_id")
        steps.append(StepRecord(step=s.step, state_json=state.to_json(), agent_id=agent, agent_name=agent_name(agent),
                                is_hardcoded=s.decided_by == "rule", **data))
    return EpisodeRecord(
        episode_id=stored_id(key_name, body.episode_id), run_id=run_id, task_id=body.task_id, family=body.family,
        domain_name=body.domain_name, policy_name=body.policy_name,
        policy_version=body.policy_version or served_version, llm_backend=body.llm_backend,
        success_validator=body.success_validator, success_oracle=body.success_oracle, steps=steps,
        model_version=served_version, seed=body.seed, final_plan=body.final_plan,
        natural_language_plan=body.natural_language_plan,
        total_llm_calls=sum(s.llm_calls for s in steps), total_tokens_in=sum(s.tokens_in for s in steps),
        total_tokens_out=sum(s.tokens_out for s in steps), total_cost_usd=sum(s.cost_usd for s in steps),
        wall_s=body.wall_s, created_at=time.time(), solver_versions=json.dumps({}),
        code_version=FEEDBACK_CODE)


@dataclass
class FeedbackSettings:
    store_url: str
    run_id: str
    tasks_spec: str = "bundled"
    episodes_per_hour: int = 600
    bytes_per_hour: int = 50_000_000
    batch_size: int = 64
    batch_wait_s: float = 0.5


def stored_id(key_name: str, episode_id: str) -> str:
    """Episode IDs are namespaced by the key that sent them: no key can take another's ID."""
    return f"{key_name}:{episode_id}"


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class FeedbackWriter:
    """Quotas, de-duplication, verification and batched commits for every replica's feedback."""

    def __init__(self, settings: FeedbackSettings) -> None:
        from rollout.store import TrajectoryStore

        self.settings = settings
        self.store = TrajectoryStore(settings.store_url)
        self.quota = HourlyQuota(settings.episodes_per_hour, settings.bytes_per_hour)
        self._seen: dict[str, str] | None = None  # stored episode_id -> content fingerprint
        self._queue: list[tuple[EpisodeRecord, dict[str, Any], asyncio.Future[str]]] = []
        self._flushing: asyncio.Task[None] | None = None
        self._verifying = asyncio.Semaphore(2)
        self._in_verification = 0  # episodes that will join the queue once verified

    async def submit(self, key_name: str, body_bytes: int, episode: EpisodeRecord) -> dict[str, Any]:
        """{"outcome": stored | duplicate | conflict | over_quota, ...} for one episode."""
        seen = await self._seen_ids()
        content = fingerprint(episode)
        if episode.episode_id in seen:
            return {"outcome": "duplicate" if seen[episode.episode_id] == content else "conflict"}
        wait = self.quota.take(key_name, body_bytes)
        if wait > 0:
            return {"outcome": "over_quota", "retry_after": wait}
        seen[episode.episode_id] = content  # taken now: a concurrent repeat is a duplicate or a conflict
        try:
            return await self._verify_and_store(key_name, episode)
        except Exception:
            seen.pop(episode.episode_id, None)  # not stored: a retry may store it
            raise

    async def _verify_and_store(self, key_name: str, episode: EpisodeRecord) -> dict[str, Any]:
        self._in_verification += 1
        try:
            async with self._verifying:
                check = await asyncio.to_thread(verify_episode, episode, self.settings.tasks_spec)
        finally:
            self._in_verification -= 1
        claim = {"stored_id": episode.episode_id, "key": key_name, "verdict": check.code, "detail": check.detail,
                 "claimed_validator": episode.success_validator, "claimed_oracle": episode.success_oracle,
                 "verified_validator": check.validator, "verified_oracle": check.oracle, "received_at": time.time()}
        episode = replace(episode, success_validator=check.validator, success_oracle=check.oracle,
                          code_version=check.code)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._queue.append((episode, claim, future))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush_soon())
        return {"outcome": await future, "verdict": check.code}

    async def _seen_ids(self) -> dict[str, str]:
        if self._seen is None:
            episodes = await asyncio.to_thread(self.store.read_episodes, [self.settings.run_id])
            self._seen = {e.episode_id: fingerprint(e) for e in episodes}
        return self._seen

    async def _flush_soon(self) -> None:
        while self._queue:
            await self._gather_batch()
            batch, self._queue = self._queue[:self.settings.batch_size], self._queue[self.settings.batch_size:]
            try:
                await asyncio.to_thread(self._commit, batch)
            except Exception as exc:  # each waiting request answers it (a retryable 503)
                log.warning("feedback: committing %d episodes failed: %s: %s", len(batch), type(exc).__name__, exc)
                for _, _, future in batch:
                    future.set_exception(exc)
            else:
                for _, _, future in batch:
                    future.set_result("stored")

    async def _gather_batch(self) -> None:
        """Wait for a full batch, or batch_wait_s, longer (up to 4x) while episodes still being
        verified would join it: fewer, larger commits when verification is the slow part."""
        start = time.monotonic()
        wait = self.settings.batch_wait_s
        while len(self._queue) < self.settings.batch_size:
            waited = time.monotonic() - start
            if waited >= 4 * wait or (waited >= wait and not self._in_verification):
                return
            await asyncio.sleep(0.02)

    def _commit(self, batch: list[tuple[EpisodeRecord, dict[str, Any], Any]]) -> None:
        """One provenance document (who sent what, what it claimed, what was found), then one commit."""
        ledger = [claim for _, claim, _ in batch]
        name = f"feedback/{self.settings.run_id}/{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}.json"
        self.store.put_bytes(name, json.dumps(ledger, indent=1).encode())
        self.store.write_episodes(self.settings.run_id, [e for e, _, _ in batch])


class HourlyQuota:
    """Episodes and bytes per key over the last hour (a sliding window)."""

    WINDOW_S = 3600.0

    def __init__(self, episodes: int, nbytes: int) -> None:
        self.episodes, self.nbytes = episodes, nbytes
        self._log: dict[str, deque[tuple[float, int]]] = {}

    def take(self, key: str, nbytes: int) -> float:
        """0 when `key` may send one more episode of `nbytes` (and it is counted), else seconds to wait."""
        now = time.monotonic()
        log = self._log.setdefault(key, deque())
        while log and log[0][0] <= now - self.WINDOW_S:
            log.popleft()
        if len(log) + 1 > self.episodes or sum(b for _, b in log) + nbytes > self.nbytes:
            return max(1.0, log[0][0] + self.WINDOW_S - now) if log else self.WINDOW_S
        log.append((now, nbytes))
        return 0.0


# What the client sent about an episode: the service's own stamps (time, served version) and
# verdicts (the verified success flags, code_version) are left out, so a retry matches what is stored.
_SERVICE_FIELDS = frozenset({"created_at", "model_version", "policy_version", "run_id", "success_validator",
                             "success_oracle", "code_version"})


def fingerprint(episode: EpisodeRecord) -> str:
    data = {k: v for k, v in asdict(episode).items() if k not in _SERVICE_FIELDS}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def get_writer(settings: FeedbackSettings, namespace: str) -> Any:
    """The one writer of this store's feedback run (services on other stores or runs have their own)."""
    name = f"{WRITER_NAME}-{hashlib.sha256(f'{settings.store_url}|{settings.run_id}'.encode()).hexdigest()[:12]}"
    return FeedbackWriter.options(name=name, namespace=namespace, lifetime="detached",  # type: ignore[attr-defined]
                                  get_if_exists=True).remote(settings)

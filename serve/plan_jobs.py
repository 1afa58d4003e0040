"""Plan jobs in the trajectory store: the job document and each step's checkpoint, as they happen.

Layout under the store URL (beside the step table, rollout/store/trajectory_store.py):

    plans/jobs/<id>.json           the job: request, owner, status, counters, steps so far, result
    plans/steps/<id>/<n>.json      step n's record and the checkpoint after it (serve/plan_episode.py)
    plans/open/<id>.json           the index of unfinished jobs: one small marker per job
    plans/open-index.json          says the index is complete (a store from before it is indexed once)

A step's checkpoint is written before the job document and before the next step starts; after a
restart the runner resumes each unfinished job from its highest committed checkpoint, reading only
the jobs the index names (a store of many finished jobs starts as fast as an empty one). A job's
marker is written before its first document and removed after its final one, so a crash between
the two leaves a marker to a finished job, which start-up drops. A finished
job also becomes one episode of the feedback run (`plan_feedback_run_id`) with the service's own
verdicts (serve/feedback_verify.py), for the online loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import asdict
from typing import Any

from rollout.core.trajectory import StepRecord
from rollout.store import TrajectoryStore
from rollout.store.retry import retry_call
from serve.plan_schemas import TERMINAL

JOBS_DIR = "plans/jobs"
STEPS_DIR = "plans/steps"
OPEN_DIR = "plans/open"
INDEX_DONE = "plans/open-index.json"
PLAN_CODE = "serve-plans"


def job_id_for(key_name: str, idempotency_key: str) -> str:
    """The job an idempotency key names, per API key: no key can reach another's job."""
    return "plan-" + hashlib.sha256(f"{key_name}\x00{idempotency_key}".encode()).hexdigest()[:24]


def body_fingerprint(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def new_job(job_id: str, key_name: str, body: dict[str, Any], fingerprint: str) -> dict[str, Any]:
    now = time.time()
    return {"id": job_id, "owner": key_name, "fingerprint": fingerprint, "request": body, "status": "queued",
            "plan": "", "natural_language_plan": "", "validated": False, "oracle": None, "domain": "",
            "problem": "", "steps": [], "llm_calls": 0, "cost_usd": 0.0, "error": "", "created_at": now,
            "updated_at": now, "elapsed_s": 0.0, "resumed": 0, "episode_id": ""}


def step_summary(record: StepRecord) -> dict[str, Any]:
    """A step as the API shows it (serve/plan_schemas.py PlanStep)."""
    return {"step": record.step, "agent_id": record.agent_id, "agent_name": record.agent_name,
            "decided_by": record.decided_by, "agent_ok": record.agent_ok, "agent_message": record.agent_message[:500],
            "plan_found": record.plan_found, "plan_valid": record.plan_valid,
            "error_category": record.error_category, "llm_calls": record.llm_calls, "cost_usd": record.cost_usd}


class PlanStore:
    """The plan jobs' documents in one trajectory store (blocking calls: run them in a thread)."""

    def __init__(self, url: str) -> None:
        self.store = TrajectoryStore(url)

    def write_raw(self, job_id: str, text: str) -> None:
        """Write a job document already serialised (its updated_at set by the caller)."""
        self.store.put_bytes(f"{JOBS_DIR}/{job_id}.json", text.encode())

    def read_job(self, job_id: str) -> dict[str, Any] | None:
        data = self.store.get_bytes(f"{JOBS_DIR}/{job_id}.json")
        return None if data is None else json.loads(data)

    def all_jobs(self) -> list[dict[str, Any]]:
        return [json.loads(data) for data in self.store.blobs.read_all(JOBS_DIR, ".json")]

    def mark_open(self, job_id: str) -> None:
        """Put the job in the index of unfinished jobs (before its first document is written)."""
        self.store.put_bytes(f"{OPEN_DIR}/{job_id}.json", json.dumps({"id": job_id}).encode())

    def mark_closed(self, job_id: str) -> None:
        """Take the job out of the index (after its final document is written); gone already is fine."""
        path = self.store.fs_path(f"{OPEN_DIR}/{job_id}.json")

        def delete() -> None:
            with contextlib.suppress(FileNotFoundError):
                self.store.filesystem.delete_file(path)

        retry_call(delete, what=f"closing {job_id}", where=self.store.url, policy=self.store.retry)

    def unfinished_jobs(self) -> list[dict[str, Any]]:
        """The job documents the index names that have not ended (markers of ended or missing jobs
        are dropped); a store written before the index existed is scanned and indexed once."""
        if not self.store.exists(INDEX_DONE):
            self._build_index()
        jobs = []
        for marker in self.store.blobs.read_all(OPEN_DIR, ".json"):
            job_id = json.loads(marker)["id"]
            job = self.read_job(job_id)
            if job is None or job["status"] in TERMINAL:
                self.mark_closed(job_id)
            else:
                jobs.append(job)
        return jobs

    def _build_index(self) -> None:
        for job in self.all_jobs():
            if job["status"] not in TERMINAL:
                self.mark_open(job["id"])
        self.store.put_bytes(INDEX_DONE, json.dumps({"built_at": time.time()}).encode())

    def write_step(self, job_id: str, record: StepRecord, checkpoint: dict[str, Any] | None,
                   incarnation: str = "") -> None:
        """Step `record.step` of the job (incarnation: the runner that ran it)."""
        doc = {"record": asdict(record), "checkpoint": checkpoint, "runner": incarnation, "written_at": time.time()}
        self.store.put_bytes(f"{STEPS_DIR}/{job_id}/{record.step:05d}.json", json.dumps(doc).encode())

    def read_steps(self, job_id: str) -> list[dict[str, Any]]:
        """Every committed step document of the job, in step order."""
        docs = [json.loads(data) for data in self.store.blobs.read_all(f"{STEPS_DIR}/{job_id}", ".json")]
        return sorted(docs, key=lambda d: d["record"]["step"])


def last_checkpoint(docs: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[StepRecord]]:
    """The newest checkpoint of a job's step documents and the step records up to it (records
    written after it, without their checkpoint, were not committed: they run again)."""
    records: list[StepRecord] = []
    pending: list[StepRecord] = []
    checkpoint: dict[str, Any] | None = None
    for doc in docs:
        pending.append(StepRecord(**doc["record"]))
        if doc["checkpoint"] is not None:
            checkpoint, records, pending = doc["checkpoint"], records + pending, []
    return checkpoint, records

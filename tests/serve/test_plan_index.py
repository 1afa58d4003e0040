"""The plan runner's start-up reads only the unfinished jobs (the store's index of open jobs), not
every job document ever written: here the finished jobs' documents are made unreadable, and
start-up does not notice. A store from before the index is indexed once. Real local store."""

from __future__ import annotations

import json
from pathlib import Path

from serve.plan_jobs import INDEX_DONE, JOBS_DIR, OPEN_DIR, PlanStore, new_job

FINISHED = 2000


def _job(i: int, status: str) -> dict:
    job = new_job(f"plan-{i:024d}", "key-a", {"task_description": "t", "budget": {}}, "f")
    job["status"] = status
    return job


def _write_as_runner(store: PlanStore, job: dict) -> None:
    """What the runner does: the marker before the first document, removed after the last."""
    store.mark_open(job["id"])
    store.write_raw(job["id"], json.dumps(job))
    if job["status"] in ("succeeded", "failed", "cancelled"):
        store.mark_closed(job["id"])


def test_start_up_reads_only_the_unfinished_jobs(tmp_path: Path) -> None:
    store = PlanStore(str(tmp_path))
    assert store.unfinished_jobs() == []  # a new store: the index is made, empty
    finished = [_job(i, ("succeeded", "failed", "cancelled")[i % 3]) for i in range(FINISHED)]
    open_ = [_job(FINISHED + i, status) for i, status in enumerate(("queued", "running", "running"))]
    for job in finished + open_:
        _write_as_runner(store, job)
    for job in finished:  # a start-up that read a finished job's document would fail on it
        (tmp_path / JOBS_DIR / f"{job['id']}.json").write_text("not json")
    assert len(list((tmp_path / OPEN_DIR).iterdir())) == 3
    found = PlanStore(str(tmp_path)).unfinished_jobs()
    assert sorted(j["id"] for j in found) == sorted(j["id"] for j in open_)


def test_a_marker_left_by_a_crash_after_the_final_document_is_dropped(tmp_path: Path) -> None:
    store = PlanStore(str(tmp_path))
    store.unfinished_jobs()
    job = _job(1, "running")
    _write_as_runner(store, job)
    job["status"] = "succeeded"
    store.write_raw(job["id"], json.dumps(job))  # the service died before it removed the marker
    store.mark_open("plan-" + "9" * 24)  # and a marker whose job document was never written
    assert store.unfinished_jobs() == []
    assert list((tmp_path / OPEN_DIR).iterdir()) == []


def test_a_store_from_before_the_index_is_indexed_once(tmp_path: Path) -> None:
    store = PlanStore(str(tmp_path))
    jobs = [_job(i, s) for i, s in enumerate(("succeeded", "queued", "failed", "running"))]
    for job in jobs:  # written without markers, as the runner did before the index
        store.write_raw(job["id"], json.dumps(job))
    assert not (tmp_path / INDEX_DONE).exists()
    assert sorted(j["id"] for j in store.unfinished_jobs()) == [jobs[1]["id"], jobs[3]["id"]]
    assert (tmp_path / INDEX_DONE).exists() and len(list((tmp_path / OPEN_DIR).iterdir())) == 2

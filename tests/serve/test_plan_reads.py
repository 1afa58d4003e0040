"""Polls of plan jobs: the replica's inline reader of a local store (cached by file version), the
Retry-After it gives an unfinished job, and PlanClient.wait() following that hint."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
from scripted_http import ScriptedHTTP

from serve.plan_client import PlanClient, next_poll_s
from serve.plan_jobs import PlanStore, new_job
from serve.plan_reads import POLL_HINT_MAX_S, LocalJobReader, job_document, local_reader

JOB = "plan-" + "0" * 24


def _write(store: PlanStore, **fields: object) -> dict:
    job = {**new_job(JOB, "team-a", {"task_description": "x"}, "fp"), **fields}
    store.write_raw(JOB, json.dumps(job))
    return job


def test_a_local_store_is_read_inline_cached_until_the_file_changes(tmp_path):
    store = PlanStore(str(tmp_path / "store"))
    reader = local_reader(store)
    assert isinstance(reader, LocalJobReader)
    assert reader.read(JOB) is None  # no such job
    _write(store, status="running", steps=[{"step": 0}])
    first = reader.read(JOB)
    assert first is not None and first.owner == "team-a"
    view = json.loads(first.body)
    assert view["status"] == "running" and "owner" not in view and "fingerprint" not in view
    assert reader.read(JOB) is first  # unchanged file: the encoded answer is reused
    _write(store, status="succeeded", steps=[{"step": 0}, {"step": 1}], plan="(a)")
    second = reader.read(JOB)
    assert second is not first and json.loads(second.body)["plan"] == "(a)"


def test_the_reader_keeps_a_bounded_number_of_jobs(tmp_path):
    store = PlanStore(str(tmp_path / "store"))
    reader = LocalJobReader(store, capacity=2)
    for i in range(3):
        job_id = f"plan-{i:024d}"
        store.write_raw(job_id, json.dumps(new_job(job_id, "k", {}, "fp")))
        assert reader.read(job_id) is not None
    assert len(reader._cache) == 2


@pytest.mark.parametrize("now, expected", [(100.5, 2), (103.0, 1), (99.0, 3)])
def test_an_unfinished_job_says_when_its_next_step_is_due(now, expected):
    job = {**new_job(JOB, "k", {}, "fp"), "status": "running", "steps": [{}, {}, {}], "elapsed_s": 6.0,
           "updated_at": 100.0}  # three steps in six seconds: the next due at 102
    assert job_document(job).poll_after_s(now) == expected


def test_the_hint_is_capped_and_absent_once_the_job_ended():
    slow = {**new_job(JOB, "k", {}, "fp"), "status": "running", "steps": [{}], "elapsed_s": 500.0,
            "updated_at": 100.0}
    assert job_document(slow).poll_after_s(100.0) == POLL_HINT_MAX_S
    queued = new_job(JOB, "k", {}, "fp")  # no step yet: look again in a second
    assert job_document(queued).poll_after_s(queued["updated_at"]) == 1
    done = {**slow, "status": "failed"}
    assert job_document(done).poll_after_s(100.0) is None


def test_next_poll_follows_the_hint_and_still_backs_off_when_a_step_is_overdue():
    assert next_poll_s(0.5, True) == 0.5 and next_poll_s(2.0, False) == 3.0  # no hint: as before
    assert next_poll_s(0.5, True, hint_s=2.0) == 2.0  # after a change: when the next step is due
    assert next_poll_s(2.0, False, hint_s=1.0) == 3.0  # overdue: the hint says 1 s, the backoff wins
    assert next_poll_s(0.5, True, hint_s=9.0) == 3.0  # never longer than most_s


def test_wait_polls_when_the_service_says(flaky, monkeypatch):
    _server, url = flaky
    running = {"id": JOB, "status": "running", "steps": [{"step": 0}]}
    ScriptedHTTP.script = [(200, {"Retry-After": "2"}, running), (200, {"Retry-After": "1"}, running),
                           (200, {}, {**running, "steps": [{"step": 0}, {"step": 1}]}),
                           (200, {}, {"id": JOB, "status": "succeeded", "steps": [{}, {}, {}]})]
    pauses: list[float] = []
    clock = SimpleNamespace(sleep=pauses.append, monotonic=time.monotonic, time=time.time)
    monkeypatch.setattr("serve.plan_client.time", clock)  # this module's sleeps only, not other threads'

    with PlanClient(url) as client:
        final = client.wait(JOB, timeout_s=60)
    assert final.status == "succeeded" and final.poll_after_s is None
    assert pauses == [2.0, 3.0, 0.5]  # the hint; overdue, backing off; no hint after a change
    assert ScriptedHTTP.seen == [f"/v1/plans/{JOB}"] * 4

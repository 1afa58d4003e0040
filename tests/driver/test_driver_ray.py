"""The rollout job on a real in-process Ray (2 CPUs): exactly-once, resume, SIGKILL, quarantine, outage."""

from __future__ import annotations

import functools
import os
import threading
import time

import pytest
import ray

import tests.driver.faulty_episodes as faulty
from rollout.driver import RolloutConfig, RolloutJob, cpu_pinning
from rollout.store import RetryPolicy, TrajectoryStore
from rollout.tasks import load_tasks
from tests.s3_server import FaultProxy, S3Server

TASKS = "planbench:blocksworld:8"


@pytest.fixture(scope="module", autouse=True)
def ray_cluster(tmp_path_factory):
    # The workers' CPU claims (rollout/driver/cpu_pinning.py) in a folder of this cluster's own:
    # its workers inherit the variable; a worker another test left on the machine cannot hold them.
    os.environ["HALO_CPU_CLAIMS_DIR"] = str(tmp_path_factory.mktemp("cpu-claims"))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=256 * 1024 * 1024)
    ray.cloudpickle.register_pickle_by_value(faulty)  # fault-injecting episode functions ship to actors
    yield
    ray.shutdown()
    del os.environ["HALO_CPU_CLAIMS_DIR"]


def _config(store_url: str, **kw) -> RolloutConfig:
    return RolloutConfig(**{"store_url": store_url, "tasks": TASKS, "episodes": 24, "progress": False,
                            "commit_max_age_s": 0.5, **kw})


def _assert_exactly_once(store: TrajectoryStore, job: RolloutJob, expected_ids: set[str]) -> None:
    rows = store.read_table([job.run_id], columns=["episode_id", "step"]).to_pylist()
    assert len(rows) == len({(r["episode_id"], r["step"]) for r in rows}), "a step row is stored twice"
    assert {r["episode_id"] for r in rows} == expected_ids
    for ep in store.read_episodes([job.run_id]):
        assert [s.step for s in ep.steps] == list(range(ep.num_steps)), "an episode is incomplete"


def test_job_commits_every_episode_once_and_resumes(tmp_path):
    store = TrajectoryStore(tmp_path)
    job = RolloutJob(_config(str(tmp_path), episodes=16))
    summary = job.run()
    assert (summary.status, summary.committed, summary.resumed) == ("completed", 16, 0)
    assert summary.workers == 2 and summary.peak_rss_mb > 0
    cpus, quota = len(os.sched_getaffinity(0)), cpu_pinning.quota_cpus()
    if cpus >= 2 and (quota is None or quota >= cpus):  # pinning applies here: each worker had a CPU of its own
        # Only workers that delivered a batch report their CPUs: on a busy machine one worker may have
        # started after the other had run every episode.
        pinned = list(summary.worker_cpus.values())
        assert 1 <= len(pinned) <= 2 and all(len(cpus) == 1 for cpus in pinned) and len(set(pinned)) == len(pinned)
    assert summary.commits < 16  # batched, not one commit per episode
    _assert_exactly_once(store, job, {s.episode_id for s in job.specs})
    records = store.read_episodes([job.run_id])
    assert {r.llm_backend for r in records} == {"sim"}
    assert {(r.task_id, r.seed) for r in records} == {(s.task_id, s.seed) for s in job.specs}
    # The same command with more episodes resumes: the first 16 are skipped, 8 new ones run.
    more = RolloutJob(_config(str(tmp_path), episodes=24))
    assert more.run_id == job.run_id
    again = more.run()
    assert (again.status, again.resumed, again.committed) == ("completed", 16, 8)
    _assert_exactly_once(store, more, {s.episode_id for s in more.specs})
    meta = store.read_run_meta(job.run_id)
    assert (meta.status, meta.episodes_committed, meta.episodes_requested) == ("completed", 24, 24)
    nothing = RolloutJob(_config(str(tmp_path), episodes=24)).run()
    assert (nothing.resumed, nothing.committed) == (24, 0)


def test_sigkilled_worker_loses_nothing_and_duplicates_nothing(tmp_path):
    probe = RolloutJob(_config(str(tmp_path), episodes=24, run_id="killed"))
    victim = probe.specs[5].episode_id
    fn = functools.partial(faulty.kill_once, marker=str(tmp_path / "killed.marker"), victim=victim)
    job = RolloutJob(_config(str(tmp_path / "store"), episodes=24, run_id="killed", episode_fn=fn,
                             initial_window=6))
    summary = job.run()
    assert (tmp_path / "killed.marker").exists(), "the victim episode never ran"
    assert summary.status == "completed"
    assert summary.errors.get("worker_died") == 1 and summary.worker_restarts == 1
    assert summary.retries >= 1
    assert summary.quarantined == []
    _assert_exactly_once(TrajectoryStore(tmp_path / "store"), job, {s.episode_id for s in job.specs})


def test_a_straggler_is_backed_up_on_an_idle_worker_and_kept_once(tmp_path):
    probe = RolloutJob(_config(str(tmp_path), episodes=12, run_id="straggler"))
    victim = probe.specs[0].episode_id
    fn = functools.partial(faulty.slow_once, marker=str(tmp_path / "slow.marker"), victim=victim, delay_s=60.0)
    job = RolloutJob(_config(str(tmp_path / "store"), episodes=12, run_id="straggler", episode_fn=fn))
    t0 = time.monotonic()
    summary = job.run()
    assert time.monotonic() - t0 < 50, "the job waited for the straggler instead of its backup"
    assert (summary.status, summary.committed) == ("completed", 12)
    assert summary.backups >= 1
    _assert_exactly_once(TrajectoryStore(tmp_path / "store"), job, {s.episode_id for s in job.specs})


def test_without_tail_backups_the_job_waits_for_its_straggler(tmp_path):
    probe = RolloutJob(_config(str(tmp_path), episodes=6, run_id="no-backup"))
    fn = functools.partial(faulty.slow_once, marker=str(tmp_path / "slow.marker"), victim=probe.specs[0].episode_id,
                           delay_s=3.0)
    job = RolloutJob(_config(str(tmp_path / "store"), episodes=6, run_id="no-backup", episode_fn=fn,
                             backup_tail=False))
    summary = job.run()
    assert (summary.status, summary.committed, summary.backups) == ("completed", 6, 0)
    assert summary.run_s >= 3.0
    _assert_exactly_once(TrajectoryStore(tmp_path / "store"), job, {s.episode_id for s in job.specs})


def test_tasks_that_crash_their_worker_are_quarantined_and_the_rest_finish(tmp_path):
    tasks = load_tasks(TASKS)
    killer, raiser = tasks[0].task_id, tasks[1].task_id
    fn = functools.partial(faulty.crashing_tasks, killer=killer, raiser=raiser)
    job = RolloutJob(_config(str(tmp_path), episodes=16, run_id="crashy", episode_fn=fn, max_attempts=3))
    summary = job.run()
    assert summary.status == "completed"
    quarantined = {q.task_id: q for q in summary.quarantined}
    assert set(quarantined) == {killer, raiser}
    assert "worker process died" in quarantined[killer].error
    assert "RuntimeError: solver wrapper exploded" in quarantined[raiser].error
    assert all(q.attempts == 3 for q in quarantined.values())
    healthy = {s.episode_id for s in job.specs if s.task_id not in (killer, raiser)}
    _assert_exactly_once(TrajectoryStore(tmp_path), job, healthy)
    assert summary.dropped == 16 - len(healthy)
    meta = TrajectoryStore(tmp_path).read_run_meta("crashy")
    assert {q.task_id for q in meta.quarantined} == {killer, raiser}
    assert meta.episodes_failed == summary.dropped

    # Resuming keeps the quarantine: nothing crashes a worker again, nothing new is run.
    again = RolloutJob(_config(str(tmp_path), episodes=16, run_id="crashy", episode_fn=fn, max_attempts=3)).run()
    assert again.status == "completed" and again.committed == 0 and again.resumed == len(healthy)
    assert {q.task_id for q in again.quarantined} == {killer, raiser} and again.dropped == 16 - len(healthy)
    assert TrajectoryStore(tmp_path).read_run_meta("crashy").episodes_failed == 16 - len(healthy)
    # --retry-quarantined gives them new attempts (here the fault is gone: they now succeed).
    fixed = RolloutJob(_config(str(tmp_path), episodes=16, run_id="crashy", retry_quarantined=True)).run()
    assert fixed.status == "completed" and fixed.quarantined == [] and fixed.committed == 16 - len(healthy)
    _assert_exactly_once(TrajectoryStore(tmp_path), job, {s.episode_id for s in job.specs})


def test_storage_outage_stops_the_job_cleanly_and_a_rerun_resumes(tmp_path):
    with S3Server() as server, FaultProxy(server.port) as proxy:
        server.create_bucket("halo")
        options = {**server.env(proxy.endpoint), "max_retries": "1", "retry_timeout": "1s"}
        url = "s3://halo/data"
        store = TrajectoryStore(url, storage_options=options, retry=RetryPolicy(budget_s=2.0, initial_backoff_s=0.1,
                                                                                max_backoff_s=0.4))
        direct = TrajectoryStore(url, storage_options=server.env())
        # slow enough that the job is still running when the watcher below sees the first commit
        # (at 0.15 s an episode, a loaded CI worker finished all 40 before the storage was cut)
        fn = functools.partial(faulty.slow, delay_s=0.5)
        job = RolloutJob(_config(url, episodes=40, run_id="outage", episode_fn=fn, commit_max_age_s=0.3),
                         store=store)

        def cut_storage_after_first_commit() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not direct.episode_ids("outage"):
                time.sleep(0.1)
            proxy.set_mode("drop")

        threading.Thread(target=cut_storage_after_first_commit, daemon=True).start()
        summary = job.run()
        assert summary.status == "failed"
        assert "unavailable" in summary.message and "--run-id" in summary.message
        committed = direct.episode_ids("outage")
        assert 0 < len(committed) < 40
        _assert_exactly_once(direct, job, committed)
        # Storage is back: the same job resumes and ends with every episode exactly once.
        proxy.set_mode("pass")
        resumed = RolloutJob(_config(url, episodes=40, run_id="outage", storage_options=options)).run()
        assert resumed.status == "completed" and resumed.resumed == len(committed)
        _assert_exactly_once(direct, job, {s.episode_id for s in job.specs})
        assert direct.read_run_meta("outage").status == "completed"

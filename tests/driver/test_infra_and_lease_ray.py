"""Infrastructure failures during a real job (real Ray, real planners, the LLM agents over HTTP to
the fake OpenAI server) are never committed and are redone by the next resume; a second writer
of a run is refused by the run's lease and nothing is stored twice."""

from __future__ import annotations

import functools
import os
import threading
import time

import pytest
import ray

import tests.driver.faulty_episodes as faulty
from rollout.driver import RolloutConfig, RolloutJob
from rollout.store import TrajectoryStore
from rollout.store.lease import LeaseHeld
from tests.fake_openai import FakeOpenAI, Reply


@pytest.fixture(scope="module", autouse=True)
def ray_cluster(tmp_path_factory):
    os.environ["HALO_CPU_CLAIMS_DIR"] = str(tmp_path_factory.mktemp("cpu-claims"))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=256 * 1024 * 1024)
    ray.cloudpickle.register_pickle_by_value(faulty)
    yield
    ray.shutdown()
    del os.environ["HALO_CPU_CLAIMS_DIR"]


def test_junk_endpoint_commits_nothing_and_the_resume_redoes_every_episode(tmp_path):
    answer = {"reply": Reply.malformed()}
    with FakeOpenAI(default=lambda body: answer["reply"]) as server:
        config = RolloutConfig(store_url=str(tmp_path), tasks="planbench:blocksworld:3", episodes=3,
                               llm=f"openai:gpt-test@{server.base_url}", replicas=1, max_steps=3, progress=False,
                               commit_max_age_s=0.2, backup_tail=False)
        first = RolloutJob(config).run()
        store = TrajectoryStore(tmp_path)
        assert first.status == "failed" and "infrastructure failure" in first.message, first.message
        assert first.infra_failures == 9  # 3 episodes x (1 + 2 retries), each time bad_response
        assert first.committed == 0 and store.episode_ids(first.run_id) == set()
        meta = store.read_run_meta(first.run_id)
        assert meta.status == "failed" and meta.errors.get("infra:llm:bad_response") == 9
        assert ("infra:llm:bad_response", 9) in first.top_failures

        answer["reply"] = Reply.text("I cannot help with that.")  # the endpoint works; the agents fail
        second = RolloutJob(config).run()
    assert second.status == "completed" and second.resumed == 0 and second.committed == 3, second.message
    episodes = store.read_episodes([first.run_id])
    assert len(episodes) == 3 and not any(ep.infra_error for ep in episodes)
    assert all("unusable reply" in ep.steps[0].agent_message for ep in episodes)  # real outcomes, stored


def test_endpoint_dying_mid_job_stops_it_past_the_threshold(tmp_path):
    calls = {"n": 0}

    def flaky(body):  # noqa: ANN001, ANN202
        calls["n"] += 1
        return Reply.text("no pddl here") if calls["n"] <= 4 else Reply.status(503)

    with FakeOpenAI(default=flaky) as server:
        config = RolloutConfig(store_url=str(tmp_path), tasks="planbench:blocksworld:5", episodes=40,
                               llm=f"openai:gpt-test@{server.base_url}", replicas=1, max_steps=2, progress=False,
                               max_infra_failures=5, backup_tail=False)
        summary = RolloutJob(config).run()
    assert summary.status == "failed" and summary.infra_failures >= 5
    assert "llm:server_error" in summary.message and "re-run the same command" in summary.message
    stored = TrajectoryStore(tmp_path).read_episodes([summary.run_id])
    assert len(stored) < 40 and all(ep.steps for ep in stored)


def test_a_second_writer_of_a_run_is_refused_and_nothing_is_stored_twice(tmp_path):
    # the first job's episodes wait for a gate the test opens only after the second job was refused,
    # so the first is still writing however slowly the second starts
    gate = tmp_path / "gate"
    config = RolloutConfig(store_url=str(tmp_path / "store"), tasks="planbench:blocksworld:4", episodes=12,
                           replicas=1, run_id="two-writers", progress=False, commit_max_age_s=0.2,
                           episode_fn=functools.partial(faulty.gated, gate=str(gate), max_wait_s=240))
    first = RolloutJob(config)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("summary", first.run()))
    thread.start()
    try:
        store = TrajectoryStore(tmp_path / "store")
        deadline = time.monotonic() + 180  # Ray's start alone can take tens of seconds on a loaded machine
        while not (first.lease is not None and first.lease.acquired_at) and time.monotonic() < deadline:
            threading.Event().wait(0.05)
        assert first.lease is not None and first.lease.acquired_at, "the first job never took its lease"
        # refused whether it read the first writer's lease or raced its write (write-then-confirm)
        with pytest.raises(LeaseHeld, match="run two-writers (is being written|was taken) by another process"):
            RolloutJob(config).run()
    finally:
        gate.touch()
        thread.join(timeout=300)
    assert result["summary"].status == "completed" and result["summary"].committed == 12
    rows = store.read_table(["two-writers"], columns=["episode_id", "step"]).to_pylist()
    assert len(rows) == len({(r["episode_id"], r["step"]) for r in rows})
    assert len({r["episode_id"] for r in rows}) == 12
    assert store.read_run_meta("two-writers").episodes_requested == 12

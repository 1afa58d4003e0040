"""The rollout job on a real two-node Ray cluster on this machine (ray.cluster_utils.Cluster:
a head without CPUs for the driver, two worker nodes of 1 CPU each): workers spread over the
nodes, and a node killed mid-job (raylet and all its processes) loses and duplicates nothing.

It used to hang now and then: the job's LLM budget actor was asked for the driver's node only
softly, Ray put it on a worker node most of the time, and when that node was the one killed the
surviving worker's episodes waited for LLM leases for ever. The budget actor is now pinned to the
driver's node (asserted below), and a lost budget actor stops the job instead of hanging it. The
test runs in CI; it is bounded (the job gets JOB_END_S after the kill, pytest-timeout the rest)
and reports the driver's state and stack if the job does not finish."""

from __future__ import annotations

import sys
import threading
import time
import traceback

import pytest
import ray
from ray.cluster_utils import Cluster

from rollout.driver import RolloutConfig, RolloutJob
from rollout.store import TrajectoryStore

MB = 1024 * 1024

JOB_END_S = 120  # after the node kill; it takes ~15 s (up to ~40 s on a loaded 2-core machine)

# A hard bound whatever hangs (cluster start, the fixture's shutdown): pytest-timeout fails the test.
pytestmark = pytest.mark.timeout(300)


def _start_cluster() -> Cluster:
    # Ray gives a node 30 s (fixed) to register; on a loaded 2-core machine that can fail once.
    for attempt in range(3):
        try:
            return Cluster(initialize_head=True, head_node_args={
                "num_cpus": 0, "include_dashboard": False, "object_store_memory": 128 * MB,
                # notice a dead node within ~2 s instead of the default ~30 s
                "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4}})
        except Exception:  # noqa: BLE001
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def two_nodes():
    cluster = _start_cluster()
    # both nodes start at once, then register (one by one: ~10 s more on a loaded 2-core machine)
    nodes = [cluster.add_node(num_cpus=1, object_store_memory=96 * MB, wait=False) for _ in range(2)]
    cluster.wait_for_nodes(timeout=90)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    yield cluster, nodes
    ray.shutdown()
    cluster.shutdown()


def test_a_node_killed_mid_job_loses_and_duplicates_no_episode(tmp_path, two_nodes):
    cluster, nodes = two_nodes
    # max_window=8: at most 8 episodes die with a worker; each re-runs alone (a suspect), one after
    # the other on the surviving worker, so this bounds the time after the kill.
    config = RolloutConfig(store_url=str(tmp_path), tasks="planbench:blocksworld:8", episodes=60, progress=False,
                           replicas=2, llm="sim:realtime=1,latency_ms=100,latency_sigma=0.2", commit_max_age_s=0.5,
                           llm_concurrency=16, max_window=8)
    job = RolloutJob(config)
    result: dict = {}
    runner = threading.Thread(target=lambda: result.setdefault("summary", job.run()), name="rollout-job", daemon=True)
    runner.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and job.stats.done < 10:
        time.sleep(0.2)
    assert job.stats.done >= 10, "the job did not get going"
    actor_nodes = set(ray.get([slot.actor.node_id.remote() for slot in job.slots]))
    assert actor_nodes == {nodes[0].node_id, nodes[1].node_id}  # one worker on each node
    # the budget actor lives on the driver's node (the head): it survives the kill
    budget_node = ray.get(job.pool.budget.__ray_call__.remote(lambda _: ray.get_runtime_context().get_node_id()),
                          timeout=30)
    assert budget_node == cluster.head_node.node_id
    in_flight_before = job.stats.in_flight
    cluster.remove_node(nodes[1], allow_graceful=False)
    runner.join(timeout=JOB_END_S)
    assert not runner.is_alive(), (
        f"the job did not finish on the surviving node in {JOB_END_S} s:\n{_state(job, runner)}")
    summary = result["summary"]
    assert (summary.status, summary.committed) == ("completed", 60), summary.message
    assert summary.errors.get("worker_died", 0) >= 1 and in_flight_before > 0
    rows = TrajectoryStore(tmp_path).read_table([job.run_id], columns=["episode_id", "step"]).to_pylist()
    assert len(rows) == len({(r["episode_id"], r["step"]) for r in rows}), "a step row is stored twice"
    assert {r["episode_id"] for r in rows} == {s.episode_id for s in job.specs}
    for ep in TrajectoryStore(tmp_path).read_episodes([job.run_id]):
        assert [s.step for s in ep.steps] == list(range(ep.num_steps)), "an episode is incomplete"


def _state(job: RolloutJob, runner: threading.Thread) -> str:
    """Where a job that did not finish stands: its workers, counters and the driver's stack."""
    lines = [f"stats: done={job.stats.done} committed={job.stats.committed} in_flight={job.stats.in_flight} "
             f"errors={dict(job.stats.errors)} stop_reason={job.pool.stop_reason!r}"]
    lines += [f"slot {s.index}: dead={s.dead} ready={s.ready} in_flight={s.in_flight} solo={s.solo} pid={s.pid}"
              for s in job.slots]
    frame = sys._current_frames().get(runner.ident)
    if frame is not None:
        lines += ["driver thread:", *traceback.format_stack(frame)]
    return "\n".join(lines)

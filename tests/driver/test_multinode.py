"""The rollout job on a real two-node Ray cluster on this machine (ray.cluster_utils.Cluster:
a head without CPUs for the driver, two worker nodes of 1 CPU each): workers spread over the
nodes, and a node killed mid-job (raylet and all its processes) loses and duplicates nothing."""

from __future__ import annotations

import os
import threading
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from rollout.driver import RolloutConfig, RolloutJob
from rollout.store import TrajectoryStore

MB = 1024 * 1024

# Opt-in until its hang is found: after the node kill the job sometimes does not finish (seen on a
# quiet machine and on a loaded one); a hang would take the whole CI run with it.
pytestmark = pytest.mark.skipif(os.environ.get("HALO_MULTINODE_TESTS") != "1",
                                reason="multi-node kill test is opt-in: HALO_MULTINODE_TESTS=1")


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
    nodes = [cluster.add_node(num_cpus=1, object_store_memory=96 * MB) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    yield cluster, nodes
    ray.shutdown()
    cluster.shutdown()


def test_a_node_killed_mid_job_loses_and_duplicates_no_episode(tmp_path, two_nodes):
    cluster, nodes = two_nodes
    config = RolloutConfig(store_url=str(tmp_path), tasks="planbench:blocksworld:8", episodes=60, progress=False,
                           replicas=2, llm="sim:realtime=1,latency_ms=300,latency_sigma=0.2", commit_max_age_s=0.5,
                           llm_concurrency=16)  # the budget actor lives on the head: it survives
    job = RolloutJob(config)
    result: dict = {}
    runner = threading.Thread(target=lambda: result.setdefault("summary", job.run()))
    runner.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and job.stats.done < 10:
        time.sleep(0.2)
    assert job.stats.done >= 10, "the job did not get going"
    actor_nodes = set(ray.get([slot.actor.node_id.remote() for slot in job.slots]))
    assert actor_nodes == {nodes[0].node_id, nodes[1].node_id}  # one worker on each node
    in_flight_before = job.stats.in_flight
    cluster.remove_node(nodes[1], allow_graceful=False)
    runner.join(timeout=300)
    assert not runner.is_alive(), "the job did not finish on the surviving node"
    summary = result["summary"]
    assert (summary.status, summary.committed) == ("completed", 60), summary.message
    assert summary.errors.get("worker_died", 0) >= 1 and in_flight_before > 0
    rows = TrajectoryStore(tmp_path).read_table([job.run_id], columns=["episode_id", "step"]).to_pylist()
    assert len(rows) == len({(r["episode_id"], r["step"]) for r in rows}), "a step row is stored twice"
    assert {r["episode_id"] for r in rows} == {s.episode_id for s in job.specs}
    for ep in TrajectoryStore(tmp_path).read_episodes([job.run_id]):
        assert [s.step for s in ep.steps] == list(range(ep.num_steps)), "an episode is incomplete"

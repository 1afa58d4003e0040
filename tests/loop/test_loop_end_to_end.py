"""Two cycles of the online loop end to end, in the simulated world on CPU, with crashes.

Real pieces throughout: Ray in-process, the rollout job writing to a Delta store, the decision
service on Ray Serve (HTTP on 127.0.0.1), student rollouts through that service, fast-policy
fine-tuning on Ray Train, the gate's held-out episodes with real planners and validators.
A crash is injected twice in cycle 2: after the candidate is uploaded but before the train event
is written, and after the candidate is posted to the service but before the promote event; each
restart must adopt what the crashed process did instead of training or promoting again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import ray

from cluster.loop.config import GateConfig, LoopConfig, TrainSettings
from cluster.loop.events import EventLog
from cluster.loop.runner import LoopHooks, LoopRunner
from cluster.loop.serving import ServingClient
from rollout.driver import RolloutConfig, run_rollout
from rollout.store import TrajectoryStore
from serve.ports import free_port
from train.fast_policy import train_fast_policy

pytestmark = pytest.mark.timeout(400)

TASKS = "planbench:blocksworld:12"
HOLDOUT = "planbench:blocksworld:3"


class SimulatedCrash(RuntimeError):
    pass



@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    from ray import serve

    from cluster.serve_entry import app as decision_app
    from serve.config import ServeConfig
    from serve.launcher import RunningService, ensure_serve, stop_service, wait_ready
    from serve.registry import get_registry

    root = tmp_path_factory.mktemp("loop")
    store_url = str(root / "store")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    service = None
    try:
        store = TrajectoryStore(store_url)
        # The teacher's data and the first served model (the training part's cold-start fit).
        teacher = run_rollout(RolloutConfig(store_url=store_url, tasks=TASKS, policy="rules+scripted", llm="sim",
                                            episodes=24, replicas=1, run_id="teacher-0", progress=False), store=store)
        assert teacher.status == "completed" and teacher.committed == 24
        v0 = train_fast_policy(store.read_episodes(["teacher-0"]), root / "v0", check="oracle", name="bootstrap")
        # Started the way the RayService starts it: Serve runs the application builder its
        # serveConfigV2 names (cluster.serve_entry:app) with the config as args.
        config = ServeConfig(model=str(root / "v0"), host="127.0.0.1", port=free_port(), num_replicas=1,
                             replica_num_cpus=0.5, feedback_store=store_url)
        owns_serve = ensure_serve(config)
        serve.run(decision_app(config.to_dict()), name=config.app_name, route_prefix=config.route_prefix)
        service = RunningService(config, get_registry(config.registry_name, config.registry_namespace),
                                 owns_ray=False, owns_serve=owns_serve)
        wait_ready(service.url, 120)
        yield {"root": root, "store": store, "service": service, "v0": v0}
    finally:
        if service is not None:
            stop_service(service)
        ray.shutdown()


def _config(world: dict) -> LoopConfig:
    return LoopConfig(
        name="ci", store=str(world["store"].url), work_dir=str(world["root"] / "work"), tasks=TASKS,
        holdout_tasks=HOLDOUT, policy_class="fast", llm="sim", accept_filter="oracle", min_new_episodes=6,
        old_data_share=0.3, rollout_episodes=10, max_rollout_batches=3, rollout_replicas=1, poll_s=0.5,
        max_cycles=2, serve_url=world["service"].url,
        # Promotion is what this test follows, so the gate promotes without a test here; the
        # sequential test itself is tested in test_gate.py (and measured by benchmarks/gate.py).
        gate=GateConfig(mode="always"),
        train=TrainSettings(workers=1, epochs=40))


def _crash_at(key: str) -> LoopHooks:
    def after_effect(k: str) -> None:
        if k == key:
            raise SimulatedCrash(k)

    return LoopHooks(after_effect=after_effect)


def test_two_cycles_with_crashes_resume_without_duplicate_training_or_promotion(world: dict) -> None:
    config = _config(world)
    store: TrajectoryStore = world["store"]
    serving = ServingClient(config.serve_url)
    lines: list[str] = []

    feedback_id = _post_feedback(config.serve_url)

    # Run 1: cycle 1 completes; cycle 2 dies after uploading its candidate, before recording it.
    first = LoopRunner(config, store=store, hooks=_crash_at("c0002.train"), echo=lines.append)
    with pytest.raises(SimulatedCrash):
        first.run()
    assert first.trainings == 2 and first.deploys == 1
    log = EventLog(store, "ci")
    c1 = log.get("c0001.train").data
    assert log.get("c0001.promote").data["version"] == c1["version"]
    assert log.get("c0002.train") is None and store.exists(f"models/loop-ci/{_candidate_version(log, 2)}/manifest.json")
    # Cycle 2's rollouts went through the service while it served cycle 1's model.
    assert log.get("c0002.collect").data["rollout_runs"]
    for run_id in log.get("c0002.collect").data["rollout_runs"]:
        steps = [s for e in store.read_episodes([run_id]) for s in e.steps]
        assert any(s.decided_by != "rule" for s in steps), "student rollouts made no model decision"

    # Run 2: adopts the uploaded candidate (no training), gates it, dies after posting it to the service.
    second = LoopRunner(config, store=store, hooks=_crash_at("c0002.promote"), echo=lines.append)
    with pytest.raises(SimulatedCrash):
        second.run()
    c2 = EventLog(store, "ci").get("c0002.train").data
    assert second.trainings == 0 and c2["adopted"] is True
    assert second.deploys == 1 and serving.current().version == c2["version"]

    # Run 3: finds the candidate already served; records it without posting again.
    third = LoopRunner(config, store=store, echo=lines.append)
    third.run()
    assert third.trainings == 0 and third.deploys == 0
    log = EventLog(store, "ci")
    promote2 = log.get("c0002.promote").data
    assert promote2["already_deployed"] is True and promote2["previous"]["version"] == c1["version"]
    assert [e.key for e in log.events()] == ["init"] + [f"c000{c}.{s}" for c in (1, 2)
                                                         for s in ("collect", "train", "gate", "promote", "done")]

    # The service's own audit trail: bootstrap, then each candidate exactly once.
    history = [h for h in serving.status()["history"] if h["action"] == "deploy"]
    assert [h["version"] for h in history] == [world["v0"].version, c1["version"], c2["version"]]

    # Data lineage: cycle 2 trained on its new episodes plus a share of cycle 1's, none held out.
    snap1 = log.get_json(log.get("c0001.collect").data["snapshot_file"])
    snap2 = log.get_json(log.get("c0002.collect").data["snapshot_file"])
    assert not set(snap1["new"]) & set(snap2["new"])
    assert feedback_id in snap1["new"]  # an accepted episode that came in through /v1/feedback
    assert snap2["old"] and set(snap2["old"]) <= set(snap1["new"])
    holdout = set(log.get("init").data["holdout_task_ids"])
    trained_on = {e.task_id for e in store.read_episodes(snap2["runs"]) if e.episode_id in set(snap2["new"])}
    assert trained_on and not trained_on & holdout
    assert c2["warm_start_from"]["version"] == c1["version"]
    # Warm start: the cycle-2 model keeps every feature row of the cycle-1 model it started from.
    with np.load(Path(store.fs_path(f"models/loop-ci/{c1['version']}/weights.npz"))) as w1, \
            np.load(Path(store.fs_path(f"models/loop-ci/{c2['version']}/weights.npz"))) as w2:
        assert set(w1["buckets"].tolist()) <= set(w2["buckets"].tolist())

    # The promoted model answers the next student rollouts and production decisions.
    next_run = third._rollout_batch(3, 0)
    assert any(s.decided_by != "rule" for e in store.read_episodes([next_run]) for s in e.steps)
    decide = httpx.post(f"{config.serve_url}/v1/decide", json={
        "task_description": "stack the blocks", "domain": "(define (domain d))", "problem": "(define (problem p))",
        "plan": "(unstack a b)", "validator_errors": "goal not reached", "history": [14]}, timeout=10).json()
    assert decide["decided_by"] == "model" and decide["policy_version"] == c2["version"]

    # `halo loop status` prints the history and writes the plot.
    png = world["root"] / "status.png"
    out = subprocess.run([sys.executable, "-m", "cluster.cli", "loop", "status", "--store", str(store.url),
                          "--name", "ci", "--plot", str(png)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    print(out.stdout)
    rows = [line for line in out.stdout.splitlines() if line.split("|")[0].strip() in ("1", "2")]
    assert len(rows) == 2 and all(line.rstrip().endswith("done") for line in rows)
    assert c2["version"] in out.stdout and "promote" in out.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _post_feedback(url: str) -> str:
    """A client's accepted episode (run in this process, on a non-held-out task) sent to /v1/feedback."""
    import json

    from rollout.loop.episode import EpisodeConfig, run_episode_sync
    from rollout.policies import make_policy
    from rollout.tasks import load_tasks

    task = load_tasks(TASKS)[6]
    for seed in range(100, 130):
        ep = run_episode_sync(task, make_policy("rules+scripted", seed=seed), EpisodeConfig(seed=seed, run_id="client"))
        if ep.success_oracle:
            break
    else:
        pytest.fail("the scripted policy solved no episode to send as feedback")
    step_fields = ("decided_by", "domain_after", "problem_after", "plan_after", "plan_found", "plan_valid",
                   "error_category", "llm_calls", "tokens_in", "tokens_out")
    body = {"episode_id": "client-episode-1", "llm_backend": "sim", "success_validator": ep.success_validator,
            "success_oracle": True, "task_id": ep.task_id, "family": ep.family, "domain_name": ep.domain_name,
            "final_plan": ep.final_plan,
            "steps": [{"step": st.step, "state": json.loads(st.state_json), "agent_id": st.agent_id,
                       **{f: getattr(st, f) for f in step_fields}} for st in ep.steps]}
    response = httpx.post(f"{url}/v1/feedback", json=body, timeout=30)
    assert response.status_code == 200 and response.json()["stored"], response.text
    # keyless (loopback) service: stored under the local caller's name, verified by the service
    assert response.json()["verdict"] == "serve-feedback:verified", response.text
    return response.json()["stored_id"]


def _candidate_version(log: EventLog, cycle: int) -> str:
    from cluster.loop.data import Snapshot

    snap = Snapshot.from_dict(log.get_json(log.get(f"c{cycle:04d}.collect").data["snapshot_file"]))
    return f"c{cycle:04d}-{snap.digest[:8]}"


def test_a_second_loop_process_on_the_same_log_is_refused(world: dict) -> None:
    from cluster.loop.events import EventLogError

    config = _config(world)
    holder = EventLog(world["store"], "ci-lease")
    holder.acquire_lease()
    try:
        runner = LoopRunner(LoopConfig(**{**config.__dict__, "name": "ci-lease"}), store=world["store"])
        with pytest.raises(EventLogError, match="running elsewhere"):
            runner.run()
    finally:
        holder.release_lease()

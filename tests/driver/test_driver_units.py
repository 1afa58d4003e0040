"""Pieces of the rollout job that need no Ray: episode planning, run IDs, AIMD, argument errors."""

from __future__ import annotations

import functools
import math
import os
import time

import pytest
from typer.testing import CliRunner

from cluster.cli import app
from rollout.driver import RolloutConfig, RolloutJob
from rollout.driver.aimd import AIMDWindow
from rollout.driver.episode_set import default_run_id, plan_episodes
from rollout.tasks import load_tasks


def test_plan_cycles_tasks_with_new_seeds_and_is_prefix_stable():
    tasks = load_tasks("planbench:blocksworld:3")
    specs = plan_episodes(tasks, 7, "run-x", base_seed=5)
    assert [(s.task_index, s.seed) for s in specs] == [(0, 5), (1, 5), (2, 5), (0, 6), (1, 6), (2, 6), (0, 7)]
    assert len({s.episode_id for s in specs}) == 7
    assert plan_episodes(tasks, 10, "run-x", base_seed=5)[:7] == specs  # more episodes extend a run
    with pytest.raises(ValueError, match="no tasks"):
        plan_episodes([], 3, "run-x")
    with pytest.raises(ValueError, match="at least 1"):
        plan_episodes(tasks, 0, "run-x")


def test_default_task_list_prefix_is_a_mix_of_domains():
    tasks = load_tasks("planbench:all")
    first = plan_episodes(tasks, 12, "run-x")
    domains = [tasks[s.task_index].domain_name for s in first]
    assert len(set(domains)) >= 3, domains  # not 12 blocksworld tasks in a row
    every = plan_episodes(tasks, len(tasks), "run-x")
    assert sorted(s.task_index for s in every) == list(range(len(tasks)))  # still each task once per round


def test_default_run_id_is_stable_and_path_safe():
    a = default_run_id({"policy": "rules+scripted", "tasks": "planbench:all", "seed": 0})
    assert a == default_run_id({"seed": 0, "tasks": "planbench:all", "policy": "rules+scripted"})
    assert a != default_run_id({"policy": "rules+scripted", "tasks": "planbench:all", "seed": 1})
    assert a.startswith("rules-scripted-")


def test_aimd_grows_additively_and_halves_on_congestion():
    w = AIMDWindow(limit=4.0)
    for _ in range(40):
        assert w.on_result(ok=True, llm_latency_ms=100.0) == "increase"
    grown = w.limit
    assert 8 < grown < 12  # about +1 per window of completions
    # solver calls queueing (CPUs saturated): stop growing; queueing far too long: cut
    assert w.on_result(ok=True, llm_latency_ms=100.0, solver_wait_s=0.6, solver_run_s=0.2) == "hold"
    assert w.limit == grown
    assert w.on_result(ok=True, llm_latency_ms=100.0, solver_wait_s=2.0, solver_run_s=0.2) == "decrease"
    assert w.limit == pytest.approx((grown + 0) / 2, rel=0.05)
    assert w.on_result(ok=False) == "hold"  # one cut per window, not one per slow episode
    for _ in range(int(w.limit)):
        w.on_result(ok=True, llm_latency_ms=100.0)
    before = w.limit
    for _ in range(20):  # the endpoint slows down 5x
        w.on_result(ok=True, llm_latency_ms=500.0)
    assert w.limit < before / 2 and w.decreases >= 2
    floor = AIMDWindow(limit=1.0)
    floor.on_result(ok=False)
    assert floor.size == 1


@pytest.mark.parametrize("args, message", [
    (["--policy", "nonsense"], "unknown policy"),
    (["--tasks", "planbench:nope:x"], "count must be a positive integer"),
    (["--llm", "claude"], "--llm 'claude': unknown backend 'claude'"),
    (["--episodes", "0"], "at least 1"),
    (["--run-id", "../x"], "invalid run ID"),
    (["--replicas", "0"], "--replicas must be at least 1"),
    (["--llm", "sim:realtime=yes"], "realtime must be 0 or 1"),
    (["--llm", "sim:latency_ms=-5"], "latency_ms must be >= 0"),
    (["--llm-rpm", "0"], "--llm-rpm must be a positive number"),
    (["--llm-tpm", "-1"], "--llm-tpm must be a positive number"),
    (["--policy", "rules+model:/no/such/dir"], "model directory does not exist"),
])
def test_bad_arguments_fail_before_anything_starts(tmp_path, args, message):
    result = CliRunner().invoke(app, ["rollout", "--store", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "steps").exists()


def test_a_run_id_cannot_be_reused_with_other_arguments(tmp_path):
    from rollout.store import RunMeta, TrajectoryStore

    store = TrajectoryStore(tmp_path)
    first = RolloutJob(RolloutConfig(store_url=str(tmp_path), tasks="planbench:blocksworld:2", episodes=2,
                                     run_id="mine"))
    meta = RunMeta("mine", config=first.config.identity())
    store.write_run_meta(meta)
    other = RolloutJob(RolloutConfig(store_url=str(tmp_path), tasks="planbench:blocksworld:2", episodes=2,
                                     run_id="mine", policy="random"))
    with pytest.raises(ValueError, match=r"already exists .* \(policy: 'rules\+scripted' -> 'random'\)"):
        other.run()


def test_runs_show_unknown_run_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["runs", "--store", str(tmp_path), "show", "nope"])
    assert result.exit_code == 2
    assert "no run 'nope'" in result.output
    listing = CliRunner().invoke(app, ["runs", "--store", str(tmp_path)])
    assert listing.exit_code == 0 and "no runs" in listing.output


def test_aimd_window_is_not_cut_by_latency_noise_alone():
    """Log-normal latencies (sigma 0.5, as the simulated world draws them) are noise, not congestion:
    comparing against the fastest call ever seen used to halve windows down to 1-2."""
    import random

    rng = random.Random(3)
    w = AIMDWindow(limit=4.0)
    for _ in range(500):
        w.on_result(ok=True, llm_latency_ms=2500.0 * math.exp(rng.gauss(0.0, 0.5)))
    assert w.decreases == 0 and w.limit > 4.0


def test_aimd_holds_on_a_short_solver_queue_and_cuts_a_long_one():
    w = AIMDWindow(limit=6.0)
    assert w.on_result(ok=True, solver_wait_s=0.5, solver_run_s=0.1) == "hold"  # saturated: do not grow
    assert w.limit == 6.0
    for _ in range(6):
        w.on_result(ok=True, solver_wait_s=0.5, solver_run_s=0.1)
    assert w.on_result(ok=True, solver_wait_s=1.0, solver_run_s=0.1) == "decrease"  # 10x: far too long
    assert w.limit == 3.0


def test_aimd_does_not_cut_on_a_solver_queue_shorter_than_the_llm_wait():
    """With seconds per LLM call, a queue of a second or two (one long search holding the solver
    thread) is not over-filling: the window holds; a queue of many LLM calls' length is cut."""
    w = AIMDWindow(limit=256.0)
    for _ in range(300):
        w.on_result(ok=True, llm_latency_ms=2800.0, solver_wait_s=0.001, solver_run_s=0.013)
    size = w.size
    assert w.on_result(ok=True, llm_latency_ms=2800.0, solver_wait_s=5.0, solver_run_s=0.013) == "hold"
    assert w.size == size
    assert w.on_result(ok=True, llm_latency_ms=2800.0, solver_wait_s=8.0, solver_run_s=0.013) == "decrease"


def test_worker_tree_cpu_counts_live_descendants_like_psutil():
    """_tree_cpu_s reads /proc directly (psutil's recursive children() scans every process)."""
    import subprocess
    import sys

    import psutil

    from rollout.driver.worker import _tree_cpu_s

    busy = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                             "while time.process_time() - t < 0.4: pass\ntime.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        # process_time() is a system call: the busy loop's time is about half system time
        while sum(psutil.Process(busy.pid).cpu_times()[:2]) < 0.35 and time.monotonic() < deadline:
            time.sleep(0.05)
        me = psutil.Process()
        t = me.cpu_times()
        expected = t.user + t.system + t.children_user + t.children_system
        for child in me.children(recursive=True):
            c = child.cpu_times()
            expected += c.user + c.system + c.children_user + c.children_system
        got = _tree_cpu_s()
        assert got >= 0.35  # the live child's CPU is in it
        assert abs(got - expected) < 0.1
    finally:
        busy.kill()
        busy.wait()


def test_worker_batch_keeps_each_episodes_outcome_and_ships_rows_of_those_with_steps():
    import asyncio

    from rollout.driver.worker import RolloutWorker, WorkerSetup
    from tests.driver.faulty_episodes import crashing_tasks

    tasks = load_tasks("planbench:blocksworld:3")
    specs = plan_episodes(tasks, 3, "batch", base_seed=1)
    fn = functools.partial(crashing_tasks, killer="none", raiser=tasks[1].task_id)
    worker = RolloutWorker(WorkerSetup(run_id="batch", tasks=tasks, policy_spec="rules+scripted", episode_fn=fn))
    batch = asyncio.run(worker.run_batch(specs))
    assert [o.spec.episode_id for o in batch.outcomes] == [s.episode_id for s in specs]
    raised = batch.outcomes[1]
    assert raised.summary is None and "solver wrapper exploded" in raised.error
    ok = [o for i, o in enumerate(batch.outcomes) if i != 1]
    assert all(o.summary is not None and o.summary.num_steps > 0 and not o.error for o in ok)
    rows = batch.rows
    assert rows is not None
    assert set(rows.column("episode_id").to_pylist()) == {o.spec.episode_id for o in ok}
    assert rows.num_rows == sum(o.summary.num_steps for o in ok)
    assert batch.cpu_s > 0 and batch.worker_pid == os.getpid()


def test_finished_episodes_come_back_without_waiting_for_their_slowest_batch_mate():
    """The driver reads a worker's results as a stream: a chunk goes as episodes finish, so an
    episode submitted with a slow one (a long LLM chain) is back long before it."""
    import asyncio

    from rollout.driver.worker import RolloutWorker, WorkerSetup
    from tests.driver.faulty_episodes import slow_task

    tasks = load_tasks("planbench:blocksworld:3")
    specs = plan_episodes(tasks, 3, "stream")
    fn = functools.partial(slow_task, slow_id=tasks[0].task_id, delay_s=4.0)
    worker = RolloutWorker(WorkerSetup(run_id="stream", tasks=tasks, policy_spec="rules+scripted", episode_fn=fn))

    async def run() -> list[tuple[float, list[str]]]:
        t0 = time.monotonic()
        await worker.submit(specs)
        stream = worker.results(interval_s=0.2)
        got: list[tuple[float, list[str]]] = []
        while sum(len(ids) for _, ids in got) < len(specs):
            batch = await anext(stream)
            got.append((time.monotonic() - t0, [o.spec.episode_id for o in batch.outcomes]))
            assert batch.rows is not None and set(batch.rows.column("episode_id").to_pylist()) == set(got[-1][1])
        await stream.aclose()
        return got

    got = asyncio.run(run())
    fast = {s.episode_id for s in specs[1:]}
    assert set(got[0][1]) <= fast and got[0][0] < 3.0  # the fast ones did not wait for the slow one
    assert got[-1][1] == [specs[0].episode_id] and got[-1][0] >= 4.0
    assert sorted(i for _, ids in got for i in ids) == sorted(s.episode_id for s in specs)  # each once


def test_a_batch_of_four_episodes_returns_inline_through_ray():
    """Ray returns a value under 100 KiB inline; a larger one goes through the object store (~2 ms
    more CPU per call, measured). Four episodes' rows are ~140 KB as IPC: they travel compressed."""
    import asyncio
    import pickle

    from rollout.driver.worker import RolloutWorker, WorkerSetup

    tasks = load_tasks("planbench:all")[:4]
    worker = RolloutWorker(WorkerSetup(run_id="inline", tasks=tasks, policy_spec="rules+scripted"))
    batch = asyncio.run(worker.run_batch(plan_episodes(tasks, 4, "inline")))
    rows = batch.rows
    assert rows.num_rows == sum(o.summary.num_steps for o in batch.outcomes) > 4
    assert batch.rows_ipc_size > 2 * len(batch.rows_ipc)
    assert len(pickle.dumps(batch)) < 100 * 1024


def test_aimd_slow_start_doubles_on_idle_cpus_and_stops_at_saturation():
    w = AIMDWindow(limit=8.0, max_limit=10_000)
    for _ in range(6):  # three seconds of status polls with the CPUs mostly idle
        assert w.on_status(in_flight=w.size, solver_utilisation=0.3, solver_queued=0, llm_waiting=0) == "increase"
    assert w.size == 8 * 2**6
    # a window not yet filled (batches on their way, nothing left to send) is no signal
    assert w.on_status(in_flight=10, solver_utilisation=0.1, solver_queued=0, llm_waiting=0) == "hold"
    # solver threads busy: slow start ends, the window holds
    assert w.on_status(in_flight=w.size, solver_utilisation=0.95, solver_queued=2, llm_waiting=0) == "exit"
    assert not w.slow_start and w.size == 512
    assert w.on_status(in_flight=512, solver_utilisation=0.97, solver_queued=9, llm_waiting=0) == "hold"
    # after slow start, idle CPUs grow it by a sixteenth per status
    assert w.on_status(in_flight=512, solver_utilisation=0.5, solver_queued=0, llm_waiting=0) == "increase"
    assert w.size == 544


def test_aimd_does_not_grow_while_calls_wait_for_the_llm_budget():
    w = AIMDWindow(limit=64.0, max_limit=10_000)
    assert w.on_status(in_flight=64, solver_utilisation=0.1, solver_queued=0, llm_waiting=20) == "exit"
    assert w.on_status(in_flight=64, solver_utilisation=0.1, solver_queued=0, llm_waiting=20) == "hold"
    assert w.size == 64  # more episodes would only queue for the budget, and fill memory

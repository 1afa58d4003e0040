"""Bounded cost per decision. A state large enough to be costly to read decides in a worker thread,
so the replica's event loop keeps serving (checked on the served model itself, with a decision held
open); while one key sends crafted 0.5 MB states as fast as it can, the cost limiter charges that key
(it is both served and refused) and another key's requests are all answered, on one replica of a
real Serve application with the hostile client in its own process. How long the loop stalls and how
much the other key's tail grows are measured by benchmarks/decision_cost.py, not asserted here."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from benchmarks.heavy_sender import wait_until_ready
from benchmarks.heavy_states import heavy_state
from rollout.core.state import EpisodeState

LIGHT_KEY = "light=light-key-0123456789"
HEAVY_KEY = "heavy=heavy-key-0123456789"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def costly(cluster):
    from serve.config import ServeConfig
    from serve.launcher import start_service

    cfg = ServeConfig(model=str(cluster.models.v1), port=cluster.port, app_name="costly", route_prefix="/costly",
                      num_replicas=1, replica_num_cpus=0, registry_name="reg-costly",
                      api_keys=[LIGHT_KEY, HEAVY_KEY], max_body_bytes=1_048_576, max_inflight_per_client=4)
    return start_service(cfg)


def _token(key: str) -> str:
    return key.split("=", 1)[1]


def _light_state(i: int) -> dict:
    from serve_synthetic import symptom_state

    return symptom_state(i % 4).to_dict()


def _served_model_with_a_held_decision(tmp_path: Path, gate: threading.Event) -> tuple[object, list[str]]:
    from serve_synthetic import MAP_V1, train_version

    from serve.app import _ServedModel
    from serve.runtime import load_model

    train_version(tmp_path / "m", MAP_V1, "v1")
    model = load_model(str(tmp_path / "m"), runtime="cpu")
    threads: list[str] = []
    decide = model.decide_batch

    def held(states):  # the real decision, held open until the test lets it finish
        threads.append(threading.current_thread().name)
        if states[0].planner_log:
            gate.wait(timeout=5)
        return decide(states)

    model.decide_batch = held
    return _ServedModel(lambda: model, None, None), threads  # type: ignore[arg-type]


def test_a_half_megabyte_state_decides_off_the_event_loop(tmp_path):
    gate = threading.Event()
    served, threads = _served_model_with_a_held_decision(tmp_path, gate)
    heavy = EpisodeState.from_dict(heavy_state())
    light = EpisodeState.from_dict({**heavy_state(), "domain": "", "problem": "", "planner_log": "",
                                    "validator_errors": "", "task_description": "stack the blocks"})

    async def run() -> tuple[int, str, str]:
        pending = asyncio.ensure_future(served.adecide(heavy))
        for _ in range(3000):  # until the held decision has started in its thread
            if threads:
                break
            await asyncio.sleep(0.01)
        ticks = 0
        for _ in range(5):  # the loop goes on while that decision is held
            await asyncio.sleep(0)
            ticks += 1
        light_answer = await served.adecide(light)  # small states still decide inline, on the loop
        assert not pending.done()
        gate.set()
        heavy_answer = await pending
        return ticks, light_answer.agent_name, heavy_answer.agent_name

    loop_thread = threading.current_thread().name
    ticks, light_name, heavy_name = asyncio.run(run())
    assert ticks == 5 and light_name and heavy_name
    assert threads[0] != loop_thread and threads[1] == loop_thread, threads


def _light_answers(url: str, n: int) -> list[int]:
    headers = {"Authorization": f"Bearer {_token(LIGHT_KEY)}"}
    with httpx.Client(timeout=30) as client:
        return [client.post(f"{url}/v1/decide", json=_light_state(i), headers=headers).status_code
                for i in range(n)]


def test_a_heavy_key_is_charged_for_its_states_and_another_key_is_still_answered(costly, tmp_path):
    url = costly.direct_url
    flag, stop = tmp_path / "heavy-on", tmp_path / "stop"
    sender = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "heavy_sender.py"), url,
                               _token(HEAVY_KEY), str(flag), str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        assert set(_light_answers(url, 20)) == {200}
        wait_until_ready(flag)
        flag.touch()
        loud_until = time.monotonic() + 3.0
        time.sleep(0.5)
        during = _light_answers(url, 150)
        time.sleep(max(0.0, loud_until - time.monotonic()))
    finally:
        flag.unlink(missing_ok=True)
        stop.touch()
        out, _ = sender.communicate(timeout=120)
    codes = json.loads(out.strip().splitlines()[-1])
    assert codes.get("200", 0) >= 1, codes  # the heavy key was served, within its budget ...
    assert codes.get("429", 0) >= 1, codes  # ... and refused past it
    assert set(during) == {200}, during  # the other key was never charged for the heavy key's work

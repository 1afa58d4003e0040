"""The plan runner's priority reaches every thread and every process it starts (serve/plan_runner.py
confine_whole_process): run in a child interpreter, so the test process keeps its own priority."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from serve.config import ServeConfig
from serve.plan_api import plan_settings

CHILD = textwrap.dedent("""
    import json, os, subprocess, threading
    from serve.plan_runner import confine_whole_process

    started = threading.Event()
    before = threading.Thread(target=started.wait, daemon=True)
    before.start()
    confine_whole_process(19, (), idle_class={idle})
    after = threading.Thread(target=started.wait, daemon=True)
    after.start()
    child = subprocess.Popen(["sleep", "5"])
    threads = [int(t) for t in os.listdir("/proc/self/task")]
    print(json.dumps({{
        "policies": [os.sched_getscheduler(t) for t in threads],
        "nices": [os.getpriority(os.PRIO_PROCESS, t) for t in threads],
        "child_policy": os.sched_getscheduler(child.pid),
        "child_nice": os.getpriority(os.PRIO_PROCESS, child.pid)}}))
    child.kill()
    started.set()
""")


def _confined(idle: bool) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD.format(idle=idle)], capture_output=True, text=True,
                         timeout=60, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE on this platform")
def test_every_thread_and_child_runs_in_the_idle_class_at_nice_19() -> None:
    seen = _confined(idle=True)
    assert len(seen["policies"]) >= 3  # the main thread and the threads started before and after
    assert set(seen["policies"]) == {os.SCHED_IDLE}
    assert set(seen["nices"]) == {19}
    assert seen["child_policy"] == os.SCHED_IDLE and seen["child_nice"] == 19


def test_idle_class_off_keeps_the_normal_class() -> None:
    seen = _confined(idle=False)
    assert set(seen["policies"]) == {os.SCHED_OTHER}
    assert set(seen["nices"]) == {19}


def test_config_turns_the_idle_class_off(tmp_path) -> None:  # noqa: ANN001
    on = plan_settings(ServeConfig(plan_store=str(tmp_path)))
    off = plan_settings(ServeConfig(plan_store=str(tmp_path), plan_idle_class=False))
    assert on is not None and on.idle_class and on.nice == 19
    assert off is not None and not off.idle_class

"""Episode functions that wrap the real episode loop and inject worker faults, for fault tests.

They run inside Ray actors; the test registers this module to be pickled by value.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from rollout.loop.episode import run_episode


async def kill_once(task, policy, config, *, episode_id, marker: str, victim: str):  # noqa: ANN001, ANN201
    """SIGKILL this worker the first time `victim` runs (other episodes are in flight with it)."""
    if episode_id == victim and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        await asyncio.sleep(0.2)  # let the worker's other episodes get going
        os.kill(os.getpid(), signal.SIGKILL)
    return await run_episode(task, policy, config, episode_id=episode_id)


async def crashing_tasks(task, policy, config, *, episode_id, killer: str, raiser: str):  # noqa: ANN001, ANN201
    """`killer` kills its worker every time; `raiser` raises every time; the rest run normally."""
    if task.task_id == killer:
        os.kill(os.getpid(), signal.SIGKILL)
    if task.task_id == raiser:
        raise RuntimeError(f"solver wrapper exploded on {task.task_id}")
    return await run_episode(task, policy, config, episode_id=episode_id)


async def slow(task, policy, config, *, episode_id, delay_s: float):  # noqa: ANN001, ANN201
    await asyncio.sleep(delay_s)
    return await run_episode(task, policy, config, episode_id=episode_id)


async def gated(task, policy, config, *, episode_id, gate: str, max_wait_s: float):  # noqa: ANN001, ANN201
    """Waits until the file `gate` exists (at most `max_wait_s`): the job stays running until the test lets it go."""
    deadline = asyncio.get_running_loop().time() + max_wait_s
    while not Path(gate).exists() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    return await run_episode(task, policy, config, episode_id=episode_id)


async def slow_once(task, policy, config, *, episode_id, marker: str, victim: str, delay_s: float):  # noqa: ANN001, ANN201
    """The first run of `victim` stalls for `delay_s` (a straggler); any later copy runs normally."""
    if episode_id == victim and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        await asyncio.sleep(delay_s)
    return await run_episode(task, policy, config, episode_id=episode_id)


async def slow_task(task, policy, config, *, episode_id, slow_id: str, delay_s: float):  # noqa: ANN001, ANN201
    """Episodes of task `slow_id` wait `delay_s` first (a long LLM chain); the rest run normally."""
    if task.task_id == slow_id:
        await asyncio.sleep(delay_s)
    return await run_episode(task, policy, config, episode_id=episode_id)

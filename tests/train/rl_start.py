"""The RL tests' supervised start, fitted once per test module."""

from __future__ import annotations

from pathlib import Path


def fit_rl_start(out: Path, tasks: str, run_id: str) -> Path:
    """A supervised fast policy fitted on rules+scripted episodes of `tasks` (the RL tests' start)."""
    from rollout.tasks import load_tasks
    from train.fast_policy import train_fast_policy
    from train.pipeline import run_policy

    records = run_policy(load_tasks(tasks), "rules+scripted", [0, 1], run_id, 2, llm="sim:scale=0").records
    train_fast_policy(records, out, check="none", name="start")
    return out

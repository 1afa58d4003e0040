"""`model:DIR` and `majority:DIR` are known to `halo report` and `halo rollout` without `halo eval`
(registered by name in rollout/policies): a fast policy trained on real simulated episodes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from rollout.loop.episode import EpisodeConfig, run_episodes
from rollout.policies import make_policy
from rollout.sim.world import SimConfig
from rollout.tasks import load_tasks

HALO = str(Path(sys.executable).with_name("halo"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from train.fast_policy import train_fast_policy

    tasks = load_tasks("planbench:blocksworld:12")
    config = EpisodeConfig(run_id="model-spec", sim=SimConfig(latency_scale=0.0))
    records = asyncio.run(run_episodes(tasks * 2, make_policy("rules+scripted"), config))
    out = tmp_path_factory.mktemp("fast")
    train_fast_policy(records, out)
    return out


def test_halo_report_runs_a_trained_model_and_its_majority_class(model_dir):
    result = subprocess.run([HALO, "report", "--tasks", "planbench:blocksworld:3",
                             "--policy", f"rules+model:{model_dir},rules+majority:{model_dir}", "--markdown"],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"rules+model:{model_dir}" in result.stdout and f"rules+majority:{model_dir}" in result.stdout


def test_halo_rollout_runs_a_trained_model(model_dir, tmp_path):
    result = subprocess.run([HALO, "rollout", "--store", str(tmp_path), "--tasks", "planbench:blocksworld:3",
                             "--policy", f"rules+model:{model_dir}", "--episodes", "6", "--replicas", "1",
                             "--no-progress"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 new episodes committed" in result.stderr


def test_a_missing_model_dir_is_a_clear_error(tmp_path):
    result = subprocess.run([HALO, "report", "--tasks", "planbench:blocksworld:1", "--policy",
                             f"rules+model:{tmp_path / 'none'}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "model directory does not exist" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr

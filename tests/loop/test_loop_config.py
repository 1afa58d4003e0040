"""Loop settings: the example config loads; bad settings are refused with the key named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cluster.loop.config import LoopConfig, LoopConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_example_config_loads() -> None:
    cfg = LoopConfig.load(ROOT / "examples" / "loop.yaml")
    assert cfg.policy_class == "fast" and cfg.gate.alpha == 0.05 and cfg.gate.mode == "sequential"


def test_store_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HALO_STORE_URL", "s3://bucket/halo")
    assert LoopConfig().store == "s3://bucket/halo"
    assert LoopConfig(store="/data").store == "/data"


@pytest.mark.parametrize("data, message", [
    ({"min_new_episode": 3}, "unknown loop config key(s): min_new_episode"),
    ({"gate": {"min_success": 0}}, "gate.min_success"),
    ({"gate": 3}, "gate: must be a mapping"),
    ({"policy_class": "xgboost"}, "policy_class"),
    ({"accept_filter": "judge"}, "accept_filter"),
    ({"old_data_share": 1.0}, "old_data_share"),
    ({"min_new_episodes": 0}, "min_new_episodes"),
    ({"serve_url": "halo-decide:8000"}, "serve_url"),
    ({"name": "a/b"}, "name"),
    ({"policy_class": "llm"}, "train.base_model"),
    ({"gate": {"episodes_per_task": 0}}, "gate.episodes_per_task"),
    ({"gate": {"alpha": 0.0}}, "gate.alpha"),
    ({"gate": {"min_effect": 0}}, "gate.min_effect"),
    ({"gate": {"mode": "yolo"}}, "gate.mode"),
    ({"train": {"epochs": 0}}, "train.workers and train.epochs"),
    ({"train": {"mode": "rl-only"}}, "train.mode: 'rl-only'"),
    ({"policy_class": "llm", "train": {"base_model": "m", "mode": "supervised+rl"}}, "policy_class fast"),
    ({"train": {"mode": "supervised+rl", "rl": {"iteration": 3}}}, "train.rl: unknown key(s) iteration"),
])
def test_bad_settings_are_refused(data: dict, message: str) -> None:
    with pytest.raises(LoopConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        LoopConfig.from_dict(data)


def test_bad_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(LoopConfigError, match="no such config file"):
        LoopConfig.load(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(LoopConfigError, match="YAML mapping"):
        LoopConfig.load(tmp_path / "list.yaml")
    (tmp_path / "broken.yaml").write_text("a: [1, 2\n")
    with pytest.raises(LoopConfigError, match="not valid YAML"):
        LoopConfig.load(tmp_path / "broken.yaml")


def test_identity_changes_with_what_the_loop_trains_on() -> None:
    a = LoopConfig()
    assert a.identity_hash() == LoopConfig(min_new_episodes=5).identity_hash()
    assert a.identity_hash() != LoopConfig(holdout_tasks="planbench:blocksworld:3").identity_hash()


def _halo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_reports_bad_input_clearly(tmp_path: Path) -> None:
    out = _halo("loop")
    assert out.returncode == 2 and "--config loop.yaml is required" in out.stderr
    (tmp_path / "bad.yaml").write_text("policy_class: xgboost\n")
    out = _halo("loop", "--config", str(tmp_path / "bad.yaml"))
    assert out.returncode == 2 and "policy_class" in out.stderr
    out = _halo("loop", "status", "--store", str(tmp_path / "empty"), "--name", "nothing")
    assert out.returncode == 0 and "no events yet" in out.stdout


def test_publish_copies_a_verified_model_into_the_store(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.trajectories import make_episodes
    from train.fast_policy import train_fast_policy

    manifest = train_fast_policy(make_episodes("r", 30), tmp_path / "model", check="validator")
    store = tmp_path / "store"
    out = _halo("loop", "publish", str(tmp_path / "model"), "--store", str(store), "--as", "models/current")
    assert out.returncode == 0, out.stderr
    assert f"published fast {manifest.version}" in out.stdout
    assert (store / "models/current/manifest.json").read_text() == (tmp_path / "model/manifest.json").read_text()
    assert (store / "models/current/weights.npz").is_file()

    (tmp_path / "model/weights.npz").write_bytes(b"not an npz")
    out = _halo("loop", "publish", str(tmp_path / "model"), "--store", str(store), "--as", "models/broken")
    assert out.returncode == 2 and "unreadable weights" in out.stderr and not (store / "models/broken").exists()
    out = _halo("loop", "publish", str(tmp_path / "nowhere"), "--store", str(store), "--as", "models/x")
    assert out.returncode == 2 and "not a model directory" in out.stderr


def test_train_rl_keys_are_the_rl_settings_the_loop_does_not_set_itself() -> None:
    from dataclasses import fields

    from cluster.loop.config import RL_KEYS
    from train.rl_loop import RLSettings

    assert set(RL_KEYS) == {f.name for f in fields(RLSettings)} - {"tasks", "llm", "seed"}

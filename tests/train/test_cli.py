"""`halo dataset build`, `halo train`, `halo eval` through the real command line, with a local
store, a real S3-compatible server (moto_server) for the artifact, and the simulated world."""

from __future__ import annotations

import pytest
from synthetic import synthetic_episodes
from typer.testing import CliRunner

from cluster.cli import app
from rollout.store import TrajectoryStore
from tests.s3_server import S3Server
from train.policies import load_policy

runner = CliRunner()


@pytest.fixture(scope="module")
def store_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    TrajectoryStore(str(root)).write_episodes("teach", synthetic_episodes(n_tasks=10, seed=12, run_id="teach"))
    return root


@pytest.fixture(scope="module")
def dataset_dir(store_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "data"
    result = runner.invoke(app, ["dataset", "build", "--from", f"{store_run}/teach", "--out", str(out),
                                 "--tokenizer", "", "--augment", "0"])
    assert result.exit_code == 0, result.output
    assert "| filter stage | count |" in result.output and "majority agent" in result.output
    return out


def test_dataset_build_bad_sources(store_run, tmp_path):
    result = runner.invoke(app, ["dataset", "build", "--from", f"{store_run}/nope", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "no run(s) nope" in result.output
    result = runner.invoke(app, ["dataset", "build", "--from", f"{store_run}/teach", "--out", str(tmp_path / "x"),
                                 "--filter", "vibes"])
    assert result.exit_code != 0 and "--filter" in result.output


def test_train_fast_policy_into_s3_and_eval(dataset_dir, tmp_path, monkeypatch):
    import train.store_io

    monkeypatch.setattr(train.store_io, "DEFAULT_CACHE", tmp_path / "cache")
    with S3Server() as s3:
        s3.create_bucket("halo")
        for key, value in s3.env().items():
            monkeypatch.setenv(key, value)
        result = runner.invoke(app, ["train", "--policy-class", "hashed_linear", "--data", str(dataset_dir),
                                     "--out", "s3://halo/data/models/fast"])
        assert result.exit_code == 0, result.output
        assert "hashed_linear model fast" in result.output and "val_accuracy" in result.output
        local = tmp_path / "fetched"
        TrajectoryStore("s3://halo/data").download_dir("models/fast", local)
    policy = load_policy(local)
    assert policy.name == "fast"
    result = runner.invoke(app, ["eval", "--policy", str(local), "--tasks", "planbench:blocksworld:2", "--llm", "sim",
                                 "--episodes", "1", "--only", "model,majority,random", "--markdown"])
    assert result.exit_code == 0, result.output
    assert "| model (rules+model) | sim | 2 |" in result.output and "majority (rules+majority)" in result.output


def test_train_refuses_missing_base_model(dataset_dir, tmp_path):
    result = runner.invoke(app, ["train", "--data", str(dataset_dir), "--base-model", str(tmp_path / "nowhere"),
                                 "--out", str(tmp_path / "m")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_train_without_a_class_fits_the_fast_policy_and_says_so_first(dataset_dir, tmp_path):
    result = runner.invoke(app, ["train", "--data", str(dataset_dir), "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("training the fast policy (hashed_linear) on "), lines[0]
    assert any("hashed_linear model m" in line for line in lines)

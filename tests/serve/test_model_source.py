"""Models named by store URL: a model uploaded to a real S3-compatible server (moto_server on
127.0.0.1) is fetched, verified and served; bad references fail with clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from serve_synthetic import MAP_V1, symptom_state

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.s3_server import S3Server  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    with S3Server() as server:
        server.create_bucket("halo")
        yield server


def test_model_from_s3_store(s3, models, tmp_path, monkeypatch):
    from rollout.store import TrajectoryStore
    from serve.model_source import ModelSourceError, resolve_model
    from serve.runtime import load_model

    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    store = TrajectoryStore("s3://halo/prod")
    store.upload_dir(models.v1, "models/fast-v1")
    url = store.path_for("models/fast-v1")
    local = resolve_model(url, tmp_path / "cache")
    assert (local / "manifest.json").is_file() and local.is_relative_to(tmp_path / "cache")
    model = load_model(url, cache_dir=str(tmp_path / "cache"))
    assert model.version == "v1" and model.ref == url
    assert model.decide_batch([symptom_state(2)])[0].agent_id == MAP_V1[2]
    with pytest.raises(ModelSourceError, match="holds no objects"):
        resolve_model("s3://halo/prod/models/nothing-here", tmp_path / "cache")
    with pytest.raises(ModelSourceError, match="scheme"):
        resolve_model("ftp://host/model")
    with pytest.raises(ModelSourceError, match="does not exist"):
        resolve_model(str(tmp_path / "missing"))

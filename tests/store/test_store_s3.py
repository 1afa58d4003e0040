"""The store on a real S3-compatible server (moto_server on 127.0.0.1), including outages."""

from __future__ import annotations

import threading

import pytest

from rollout.store import RetryPolicy, RunMeta, StoreUnavailable, TrajectoryStore
from tests.trajectories import make_episodes

FAST_RETRY = RetryPolicy(budget_s=3.0, initial_backoff_s=0.1, max_backoff_s=0.5)


def _store(endpoint: str, bucket: str, retry: RetryPolicy = FAST_RETRY) -> TrajectoryStore:
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1", "max_retries": "1", "retry_timeout": "1s"}
    return TrajectoryStore(f"s3://{bucket}/halo", storage_options=options, retry=retry)


def test_round_trip_idempotency_runs_and_models_on_s3(s3_server, s3_bucket, monkeypatch, tmp_path):
    # Credentials and endpoint from the usual AWS variables, as a user would set them.
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    store = TrajectoryStore(f"s3://{s3_bucket}/data/halo")
    episodes = make_episodes("run-s3", 25)
    assert store.write_episodes("run-s3", episodes) == 25
    assert store.write_episodes("run-s3", make_episodes("run-s3", 30)) == 5
    assert store.read_episodes() == sorted(make_episodes("run-s3", 30), key=lambda e: e.episode_id)
    store.write_run_meta(RunMeta("run-s3", status="completed", llm_backend="sim", episodes_requested=30))
    [info] = store.list_runs()
    assert (info.run_id, info.status, info.episodes) == ("run-s3", "completed", 30)
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert "data/halo/runs/run-s3.json" in keys
    assert sum(k.startswith("data/halo/steps/run_id=run-s3/") and k.endswith(".zstd.parquet") for k in keys) == 2
    assert any(k.startswith("data/halo/steps/_delta_log/") for k in keys)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "manifest.json").write_text("{}")
    store.upload_dir(tmp_path / "m", "models/p1")
    assert store.path_for("models/p1") == f"s3://{s3_bucket}/data/halo/models/p1"
    assert store.get_bytes("models/p1/manifest.json") == b"{}"
    # A second store object (a resumed job in another process) sees the same committed IDs.
    assert TrajectoryStore(f"s3://{s3_bucket}/data/halo").episode_ids("run-s3") == store.episode_ids("run-s3")


@pytest.mark.parametrize("fault", ["drop", "503"])
def test_transient_outage_is_retried_and_commits_exactly_once(s3_server, s3_bucket, fault_proxy, fault):
    store = _store(fault_proxy.endpoint, s3_bucket, RetryPolicy(budget_s=20.0, initial_backoff_s=0.2,
                                                                 max_backoff_s=0.5))
    store.write_episodes("run-t", make_episodes("run-t", 10))
    fault_proxy.set_mode(fault)
    threading.Timer(1.5, fault_proxy.set_mode, args=("pass",)).start()
    assert store.write_episodes("run-t", make_episodes("run-t", 20)) == 10
    assert fault_proxy.faults_served > 0
    direct = _store(s3_server.endpoint, s3_bucket)
    ids = direct.read_table(columns=["episode_id", "step"]).to_pylist()
    assert len(ids) == len({(r["episode_id"], r["step"]) for r in ids})
    assert direct.episode_ids("run-t") == {e.episode_id for e in make_episodes("run-t", 20)}


def test_outage_longer_than_budget_stops_clearly_and_commits_nothing(s3_server, s3_bucket, fault_proxy):
    store = _store(fault_proxy.endpoint, s3_bucket)
    store.write_episodes("run-o", make_episodes("run-o", 10))
    version = store.version()
    fault_proxy.set_mode("drop")
    with pytest.raises(StoreUnavailable, match=r"unavailable: committing 10 episodes of run run-o failed .* "
                                               r"Nothing was half-committed.*--run-id"):
        store.write_episodes("run-o", make_episodes("run-o", 10, start=10))
    fault_proxy.set_mode("pass")
    direct = _store(s3_server.endpoint, s3_bucket)
    assert direct.version() == version
    assert len(direct.episode_ids("run-o")) == 10
    # Resuming after the outage: the orphaned data files (if any got through) are cleared, the
    # batch commits once.
    direct.remove_orphans("run-o")
    assert direct.write_episodes("run-o", make_episodes("run-o", 20)) == 10
    assert len(direct.read_episodes(["run-o"])) == 20

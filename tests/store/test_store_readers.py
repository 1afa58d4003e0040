"""The step table is readable as-is by pyarrow, DuckDB, Polars and Ray Data."""

from __future__ import annotations

import duckdb
import polars as pl
import pyarrow.dataset as pads
import pytest

from rollout.store import TrajectoryStore
from tests.trajectories import make_episodes


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    store = TrajectoryStore(root)
    a, b = make_episodes("run-a", 30), make_episodes("run-b", 12)
    store.write_episodes("run-a", a[:20])
    store.write_episodes("run-a", a)
    store.write_episodes("run-b", b)
    steps = {"run-a": sum(e.num_steps for e in a), "run-b": sum(e.num_steps for e in b)}
    return root, store, steps


def test_pyarrow_plain_parquet_and_delta(filled):
    root, store, steps = filled
    raw = pads.dataset(root / "steps", format="parquet", partitioning="hive").to_table()
    assert raw.num_rows == sum(steps.values())
    assert raw.filter(pads.field("run_id") == "run-b").num_rows == steps["run-b"]
    from deltalake import DeltaTable

    delta = DeltaTable(str(root / "steps")).to_pyarrow_table()
    assert delta.num_rows == sum(steps.values())


def test_duckdb(filled):
    root, store, steps = filled
    glob = str(root / "steps" / "*" / "*.parquet")
    rows = duckdb.sql(f"SELECT run_id, count(*) AS n, count(DISTINCT episode_id) AS e FROM "
                      f"read_parquet('{glob}', hive_partitioning = true) GROUP BY run_id ORDER BY run_id").fetchall()
    assert rows == [("run-a", steps["run-a"], 30), ("run-b", steps["run-b"], 12)]
    files = store.data_files(["run-b"])
    [(n,)] = duckdb.sql(f"SELECT count(*) FROM read_parquet({files!r})").fetchall()
    assert n == steps["run-b"]


def test_polars(filled):
    root, store, steps = filled
    lazy = pl.scan_parquet(str(root / "steps" / "**" / "*.parquet"), hive_partitioning=True)
    by_run = lazy.group_by("run_id").agg(pl.len().alias("n")).sort("run_id").collect()
    assert by_run.rows() == [("run-a", steps["run-a"]), ("run-b", steps["run-b"])]
    delta = pl.read_delta(str(root / "steps"))
    assert delta.height == sum(steps.values())
    assert delta.filter(pl.col("success_validator")).select("episode_id").n_unique() > 0


def test_ray_data(filled):
    import ray

    root, store, steps = filled
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ds = ray.data.read_parquet(store.data_files(["run-a"]))
        assert ds.count() == steps["run-a"]
        delta = ray.data.read_delta(str(root / "steps"))
        assert delta.count() == sum(steps.values())
    finally:
        ray.shutdown()

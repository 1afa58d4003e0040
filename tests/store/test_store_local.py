"""The trajectory store on a local directory: atomic, idempotent writes; faithful reads; bad input."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollout.core.trajectory import SCHEMA_VERSION, STEP_SCHEMA
from rollout.store import RunMeta, StoreError, TrajectoryStore
from rollout.store.runs import QuarantinedTask
from tests.trajectories import make_episode, make_episodes


def _parquet_files(root: Path) -> list[Path]:
    return sorted((root / "steps").rglob("*.parquet"))


def test_round_trip_is_exact_and_schema_is_step_schema(tmp_path):
    store = TrajectoryStore(tmp_path)
    episodes = make_episodes("run-a", 40)
    assert store.write_episodes("run-a", episodes) == 40
    back = store.read_episodes(["run-a"])
    assert back == sorted(episodes, key=lambda e: e.episode_id)
    table = store.read_table()
    assert table.schema == STEP_SCHEMA
    assert table.num_rows == sum(e.num_steps for e in episodes)
    assert set(table.column("schema_version").to_pylist()) == {SCHEMA_VERSION}


def test_writes_are_idempotent_by_episode_id(tmp_path):
    store = TrajectoryStore(tmp_path)
    first = make_episodes("run-a", 30)
    assert store.write_episodes("run-a", first) == 30
    assert store.write_episodes("run-a", first) == 0  # a retried batch
    assert store.write_episodes("run-a", make_episodes("run-a", 50)) == 20  # a resumed job's overlap
    dup_in_batch = make_episodes("run-a", 5, start=50) * 2
    assert store.write_episodes("run-a", dup_in_batch) == 5
    ids = store.read_table(columns=["episode_id", "step"]).to_pylist()
    assert len(ids) == len({(r["episode_id"], r["step"]) for r in ids})  # no row twice
    assert store.episode_ids("run-a") == {e.episode_id for e in make_episodes("run-a", 55)}
    # A fresh store object (another process resuming) sees the same committed set.
    assert TrajectoryStore(tmp_path).episode_ids("run-a") == store.episode_ids("run-a")


def test_each_write_is_one_batched_zstd_file_per_run(tmp_path):
    store = TrajectoryStore(tmp_path)
    store.write_episodes("run-a", make_episodes("run-a", 100))
    store.write_episodes("run-b", make_episodes("run-b", 100))
    files = _parquet_files(tmp_path)
    assert [f.parent.name for f in files].count("run_id=run-a") == 1
    assert [f.parent.name for f in files].count("run_id=run-b") == 1
    meta = pq.ParquetFile(files[0]).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert store.version() == 1  # two commits: versions 0 and 1


def test_runs_are_separate_partitions(tmp_path):
    store = TrajectoryStore(tmp_path)
    store.write_episodes("run-a", make_episodes("run-a", 10))
    store.write_episodes("run-b", make_episodes("run-b", 7))
    assert len(store.episode_ids("run-b")) == 7
    assert {e.run_id for e in store.read_episodes(["run-b"])} == {"run-b"}
    assert store.read_table(run_ids=[]).num_rows == 0
    assert store.read_table(run_ids=["no-such-run"]).num_rows == 0
    cols = store.read_table(columns=["run_id", "episode_id"])
    assert cols.column_names == ["run_id", "episode_id"]


def test_empty_store_reads_empty(tmp_path):
    store = TrajectoryStore(tmp_path / "nothing-yet")
    assert store.episode_ids("run-a") == set()
    assert store.read_table().num_rows == 0
    assert store.read_episodes() == []
    assert store.list_runs() == []
    assert store.version() is None
    assert store.read_run_meta("run-a") is None


@pytest.mark.parametrize("bad, message", [
    (lambda: [make_episode("other-run", 1)], "belongs to run 'other-run'"),
    (lambda: [make_episode("run-a", 1, steps=0)], "has no steps"),
    (lambda: make_episode("run-a", 1), "single EpisodeRecord"),
    (lambda: [{"episode_id": "x"}], "not an EpisodeRecord"),
])
def test_bad_episodes_are_rejected_and_nothing_is_written(tmp_path, bad, message):
    store = TrajectoryStore(tmp_path)
    store.write_episodes("run-a", make_episodes("run-a", 3))
    batch = bad()
    if isinstance(batch, list):
        batch = make_episodes("run-a", 2, start=10) + batch
    with pytest.raises(StoreError, match=message):
        store.write_episodes("run-a", batch)
    assert len(store.episode_ids("run-a")) == 3  # the good episodes of a bad batch are not half-written


@pytest.mark.parametrize("run_id", ["", "../escape", "a/b", "with space", "-lead"])
def test_bad_run_ids_are_rejected(tmp_path, run_id):
    store = TrajectoryStore(tmp_path)
    with pytest.raises(ValueError, match="invalid run ID"):
        store.write_episodes(run_id, [])
    with pytest.raises(ValueError, match="invalid run ID"):
        store.episode_ids(run_id)


def test_bad_urls_and_columns(tmp_path):
    with pytest.raises(ValueError, match="no bucket"):
        TrajectoryStore("s3:///prefix")
    with pytest.raises(ValueError, match="unsupported store URL scheme"):
        TrajectoryStore("gs://bucket/x")
    with pytest.raises(ValueError, match="empty"):
        TrajectoryStore("")
    with pytest.raises(ValueError, match="unknown column"):
        TrajectoryStore(tmp_path).read_table(columns=["episode_id", "nonsense"])
    with pytest.raises(ValueError, match=r"'\.\.'"):
        TrajectoryStore(tmp_path).path_for("models/../../etc")


def test_run_meta_and_list_runs(tmp_path):
    store = TrajectoryStore(tmp_path)
    episodes = make_episodes("run-a", 20)
    store.write_episodes("run-a", episodes)
    store.write_episodes("run-b", make_episodes("run-b", 4, llm_backend="openai:gpt-x"))
    meta = RunMeta("run-a", status="completed", config={"episodes": 21}, llm_backend="sim", policy="scripted",
                   episodes_requested=21, episodes_committed=20, episodes_failed=1,
                   quarantined=[QuarantinedTask("planbench/blocksworld/instance-3", "ValueError: boom", 3)],
                   errors={"worker_crash": 3})
    store.write_run_meta(meta)
    assert store.read_run_meta("run-a") == meta
    runs = {r.run_id: r for r in store.list_runs()}
    assert set(runs) == {"run-a", "run-b"}
    a = runs["run-a"]
    assert (a.status, a.episodes, a.episodes_requested, a.quarantined) == ("completed", 20, 21, 1)
    assert a.steps == sum(e.num_steps for e in episodes)
    assert a.success_validator == pytest.approx(sum(e.success_validator for e in episodes) / 20)
    graded = [e for e in episodes if e.success_oracle is not None]
    assert a.success_oracle == pytest.approx(sum(bool(e.success_oracle) for e in graded) / len(graded))
    assert a.simulated and not runs["run-b"].simulated
    assert runs["run-b"].status == "unknown"


def test_orphaned_data_files_are_removed(tmp_path):
    store = TrajectoryStore(tmp_path)
    store.write_episodes("run-a", make_episodes("run-a", 5))
    part = tmp_path / "steps" / "run_id=run-a"
    committed = _parquet_files(tmp_path)
    orphan = part / "part-00000-orphan-c000.zstd.parquet"
    orphan.write_bytes(committed[0].read_bytes())  # what a writer killed before its commit leaves
    assert store.remove_orphans("run-a") == 1
    assert _parquet_files(tmp_path) == committed
    assert len(store.read_episodes()) == 5


def test_models_live_under_the_store(tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    model = tmp_path / "model"
    (model / "adapter").mkdir(parents=True)
    (model / "manifest.json").write_text('{"name": "p"}')
    (model / "adapter" / "weights.bin").write_bytes(b"\x00\x01" * 100)
    copied = store.upload_dir(model, "models/policy-v1")
    assert copied == ["models/policy-v1/adapter/weights.bin", "models/policy-v1/manifest.json"]
    assert store.path_for("models/policy-v1") == str(tmp_path / "store" / "models" / "policy-v1")
    assert store.exists("models/policy-v1/manifest.json")
    out = store.download_dir("models/policy-v1", tmp_path / "copy")
    assert sorted(p.relative_to(tmp_path / "copy").as_posix() for p in out) == ["adapter/weights.bin",
                                                                                "manifest.json"]
    assert (tmp_path / "copy" / "adapter" / "weights.bin").read_bytes() == b"\x00\x01" * 100
    with pytest.raises(FileNotFoundError):
        store.download_dir("models/missing", tmp_path / "x")


def test_fast_arrow_conversion_matches_the_contract_conversion():
    from rollout.core.trajectory import episodes_to_table
    from rollout.store.steps_table import episodes_to_arrow

    episodes = make_episodes("run-a", 30)
    assert episodes_to_arrow(episodes).equals(episodes_to_table(episodes))
    assert episodes_to_arrow([]).equals(episodes_to_table([]))


def test_write_table_commits_whole_episodes_once(tmp_path):
    from rollout.store.steps_table import episodes_to_arrow

    store = TrajectoryStore(tmp_path)
    assert store.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 10))) == 10
    assert store.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 15))) == 5
    assert store.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 15))) == 0
    assert store.read_episodes(["run-a"]) == sorted(make_episodes("run-a", 15), key=lambda e: e.episode_id)
    assert store.write_table("run-a", episodes_to_arrow([])) == 0


def test_two_writers_of_one_run_in_turn_never_store_an_episode_twice(tmp_path):
    """A commit trusts its cached IDs only while the log has nothing after its own last commit."""
    from rollout.store.steps_table import TABLE_PROPERTIES, episodes_to_arrow

    a, b = TrajectoryStore(tmp_path), TrajectoryStore(tmp_path)
    for _ in range(2):  # the first round creates the table, the second appends to it
        assert a.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 3))) in (3, 0)
    assert b.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 6))) == 3  # sees a's commits
    assert a.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 6))) == 0  # sees b's commit
    assert a.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 8))) == 2
    assert a.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 8))) == 0  # its own, from the cache
    assert b.write_episodes("run-a", make_episodes("run-a", 9)) == 1
    ids = a.read_table(columns=["episode_id", "step"]).to_pylist()
    assert len(ids) == len({(r["episode_id"], r["step"]) for r in ids})
    assert {r["episode_id"] for r in ids} == {e.episode_id for e in make_episodes("run-a", 9)}
    from deltalake import DeltaTable

    table = DeltaTable(str(tmp_path / "steps"))
    assert table.metadata().configuration == TABLE_PROPERTIES
    for _ in range(12):  # past a checkpoint (every 10 commits)
        a.write_table("run-a", episodes_to_arrow(make_episodes("run-a", 1, start=100 + _)))
    assert any(p.name.endswith(".checkpoint.parquet") for p in (tmp_path / "steps" / "_delta_log").iterdir())
    assert len(TrajectoryStore(tmp_path).episode_ids("run-a")) == 21


@pytest.mark.parametrize("mangle, message", [
    (lambda t: t.drop_columns(["state_json"]), "lacks step-schema column"),
    (lambda t: t.slice(1), "incomplete or repeated"),
    (lambda t: t.__class__.from_batches(t.to_batches() * 2), "incomplete or repeated"),
    (lambda t: t.set_column(t.schema.get_field_index("run_id"), "run_id",
                            __import__("pyarrow").array(["run-b"] * t.num_rows)), "not only 'run-a'"),
    (lambda t: t.to_pylist(), "takes a pyarrow Table"),
])
def test_write_table_rejects_bad_tables(tmp_path, mangle, message):
    from rollout.store.steps_table import episodes_to_arrow

    store = TrajectoryStore(tmp_path)
    with pytest.raises(StoreError, match=message):
        store.write_table("run-a", mangle(episodes_to_arrow(make_episodes("run-a", 3, steps=3))))
    assert store.version() is None

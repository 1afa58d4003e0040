"""The step table: one Delta Lake table of step records under `steps/`, partitioned by run_id.

Every `write_episodes`/`write_table` call is ONE Delta commit: all rows of all its episodes
become visible together or not at all. Before committing, the episode IDs already in the run are
filtered out, so a retried, resumed or duplicated write never stores an episode twice. Only one
process should commit a given run at a time (the rollout job's committer); different runs may
commit concurrently (Delta's optimistic concurrency, conditional puts on S3).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from rollout.core.trajectory import SCHEMA_VERSION, STEP_SCHEMA, EpisodeRecord, StepRecord, table_to_episodes
from rollout.store.location import StoreLocation
from rollout.store.retry import RetryPolicy, StoreError, retry_call
from rollout.store.runs import check_run_id

TABLE_DIR = "steps"
# A checkpoint every 10 commits (Delta's default is 100): reading the table's state replays at
# most 10 JSON commits, and a long job commits every few seconds.
TABLE_PROPERTIES = {"delta.checkpointInterval": "10"}
PARTITION = "run_id"
ZSTD_LEVEL = 3
ROW_GROUP_ROWS = 64 * 1024


def _delta_schema():  # noqa: ANN202  (deltalake.Schema of STEP_SCHEMA; deltalake imported lazily)
    from deltalake import Schema

    return Schema.from_arrow(STEP_SCHEMA)


@dataclass
class _CommittedIds:
    files: set[str] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)
    own_files: set[str] = field(default_factory=set)  # base names this store committed (ids already known)


class StepTable:
    def __init__(self, location: StoreLocation, retry: RetryPolicy,
                 filesystem: Callable[[], pafs.FileSystem]) -> None:
        self.location = location
        self.url = location.url
        self.table_uri = location.join(TABLE_DIR)
        self.retry = retry
        self._filesystem = filesystem  # the store's one filesystem client, shared with its blobs
        self._delta_options = location.delta_options()
        self._dt: Any = None  # deltalake.DeltaTable once the table exists
        self._committed: dict[str, _CommittedIds] = {}
        # The table version this object's last commit produced: while no later version exists,
        # nobody else has committed and the committed-ID caches are exact, so a commit need not
        # reload the table (whose cost grows with its history) before it dedups.
        self._own_version: int | None = None
        self._lock = threading.RLock()

    @property
    def filesystem(self) -> pafs.FileSystem:
        return self._filesystem()

    # ---- writing -------------------------------------------------------------------------

    def write_episodes(self, run_id: str, episodes: list[EpisodeRecord]) -> int:
        """Commit the episodes not yet in the run, atomically. Returns how many were new."""
        check_run_id(run_id)
        unique = _check_episodes(run_id, episodes)
        if not unique:
            return 0

        def attempt() -> int:
            with self._lock:
                committed = self._committed_ids_for_commit(run_id)
                fresh = [ep for ep in unique if ep.episode_id not in committed]
                if not fresh:
                    return 0
                self._commit(episodes_to_arrow(fresh), run_id, len(fresh))
                return len(fresh)

        return retry_call(attempt, what=f"committing {len(unique)} episodes of run {run_id}",
                          where=self.url, policy=self.retry)

    def write_table(self, run_id: str, table: pa.Table) -> int:
        """Like write_episodes for step rows already in Arrow form (workers convert their own episodes,
        so the committer only writes). Every episode in `table` must be complete and appear once."""
        check_run_id(run_id)
        table, n_episodes = _check_table(run_id, table)
        if n_episodes == 0:
            return 0

        def attempt() -> int:
            with self._lock:
                committed = self._committed_ids_for_commit(run_id)
                fresh = table
                if committed:
                    seen = pc.is_in(table.column("episode_id"), value_set=pa.array(list(committed), pa.string()))
                    if pc.any(seen).as_py():
                        fresh = table.filter(pc.invert(seen))
                n = pc.count_distinct(fresh.column("episode_id")).as_py() if fresh.num_rows else 0
                if n:
                    self._commit(fresh, run_id, n)
                return n

        return retry_call(attempt, what=f"committing {n_episodes} episodes of run {run_id}",
                          where=self.url, policy=self.retry)

    def _commit(self, table: pa.Table, run_id: str, n_episodes: int) -> None:
        """Write one zstd Parquet data file with pyarrow, then add it to the Delta log in one commit.

        (deltalake's own writer is several times slower than pyarrow on these text-heavy rows:
        docs/results/2026-12-03-store-commits.md.) A crash
        between the two steps leaves an unreferenced file: invisible to Delta readers, deleted by
        `remove_orphans`, which the rollout job runs when it (re)starts a run."""
        import pyarrow.parquet as pq
        from deltalake import CommitProperties
        from deltalake.transaction import AddAction, create_table_with_add_actions

        name = f"{PARTITION}={run_id}/part-00000-{uuid.uuid4()}-c000.zstd.parquet"
        path = self.location.fs_path(f"{TABLE_DIR}/{name}")
        fs = self.filesystem
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        pq.write_table(table.drop_columns([PARTITION]), path, filesystem=fs, compression="zstd",
                       compression_level=ZSTD_LEVEL, row_group_size=ROW_GROUP_ROWS)
        add = AddAction(path=name, size=fs.get_file_info(path).size, partition_values={PARTITION: run_id},
                        modification_time=int(time.time() * 1000), data_change=True,
                        stats=json.dumps({"numRecords": table.num_rows}))
        props = CommitProperties(custom_metadata={"halo.run_id": run_id, "halo.episodes": str(n_episodes)})
        # On failure the file stays: the commit may have landed with only its answer lost, so only
        # remove_orphans (which reads the log first) may delete it.
        self._own_version = None  # until this commit is known to have landed
        if self._dt is None and self._load() is None:
            create_table_with_add_actions(self.table_uri, _delta_schema(), [add], mode="append",
                                          partition_by=[PARTITION], storage_options=self._delta_options,
                                          commit_properties=props, configuration=TABLE_PROPERTIES)
        else:
            self._add_missing_columns()
            before = self._dt.version()
            self._dt.create_write_transaction([add], mode="append", schema=STEP_SCHEMA,
                                              partition_by=[PARTITION], commit_properties=props)
            self._dt.update_incremental()  # the handle does not advance past its own commit by itself
            if self._dt.version() == before + 1:  # ours is the only commit since the handle's version
                self._own_version = before + 1
        cache = self._committed.setdefault(run_id, _CommittedIds())
        cache.own_files.add(name.rsplit("/", 1)[1])
        cache.ids.update(table.column("episode_id").to_pylist())

    def _add_missing_columns(self) -> None:
        """A table made before a column of the step schema existed gets it (nullable: its older
        rows read null) before rows that carry it are added; otherwise their values would be lost."""
        have = {f.name for f in self._dt.schema().fields}
        missing = [f for f in _delta_schema().fields if f.name not in have]
        if missing:
            self._dt.alter.add_columns(missing)

    # ---- reading -------------------------------------------------------------------------

    def episode_ids(self, run_id: str) -> set[str]:
        check_run_id(run_id)
        return retry_call(lambda: set(self._committed_ids(run_id)), what=f"listing episodes of run {run_id}",
                          where=self.url, policy=self.retry)

    def read_table(self, run_ids: list[str] | None = None, columns: list[str] | None = None) -> pa.Table:
        """Committed step rows (all runs, or the given ones) in STEP_SCHEMA types and column order."""
        wanted = list(columns) if columns is not None else list(STEP_SCHEMA.names)
        unknown = [c for c in wanted if c not in STEP_SCHEMA.names]
        if unknown:
            raise ValueError(f"unknown column(s) {unknown}; known: {', '.join(STEP_SCHEMA.names)}")
        for run_id in run_ids or []:
            check_run_id(run_id)

        def read() -> pa.Table:
            with self._lock:
                dt = self._load()
                if dt is None or (run_ids is not None and not run_ids):
                    return _conform(STEP_SCHEMA.empty_table(), wanted)
                partitions = [(PARTITION, "in", list(run_ids))] if run_ids else None
                dataset = dt.to_pyarrow_dataset(file_pruning_predicate=partitions)
                present = [c for c in wanted if c in dataset.schema.names]
                return _conform(dataset.to_table(columns=present), wanted)

        return retry_call(read, what="reading the step table", where=self.url, policy=self.retry)

    def read_episodes(self, run_ids: list[str] | None = None) -> list[EpisodeRecord]:
        episodes = table_to_episodes(self.read_table(run_ids))
        return sorted(episodes, key=lambda e: (e.run_id, e.episode_id))

    def data_files(self, run_ids: list[str] | None = None) -> list[str]:
        """URLs of the committed Parquet files, for readers that take a file list (ray.data, duckdb)."""
        def files() -> list[str]:
            with self._lock:
                dt = self._load()
                if dt is None:
                    return []
                partitions = [(PARTITION, "in", list(run_ids))] if run_ids else None
                return list(dt.file_uris(file_pruning_predicate=partitions))

        return retry_call(files, what="listing data files", where=self.url, policy=self.retry)

    def version(self) -> int | None:
        """The Delta table version (one per commit); None before the first commit."""
        def get() -> int | None:
            with self._lock:
                dt = self._load()
                return None if dt is None else dt.version()
        return retry_call(get, what="reading the table version", where=self.url, policy=self.retry)

    # ---- crash leftovers -----------------------------------------------------------------

    def remove_orphans(self, run_id: str, *, min_age_s: float = 0.0, older_than: float | None = None) -> int:
        """Delete Parquet files in the run's partition that no commit references (a writer died
        between writing data and committing). Delta readers never see them; plain Parquet globs
        would. Call only while no other process is committing this run; `older_than` (epoch
        seconds): only files written before then (the last heartbeat of the run's previous lease)."""
        check_run_id(run_id)

        def clean() -> int:
            with self._lock:
                dt = self._load()
                part_dir = self.location.fs_path(f"{TABLE_DIR}/{PARTITION}={run_id}")
                committed = set()
                if dt is not None:
                    uris = dt.file_uris(file_pruning_predicate=[(PARTITION, "=", run_id)])
                    committed = {_uri_to_fs_path(u) for u in uris}
                fs = self.filesystem
                removed = 0
                now = time.time()
                for info in fs.get_file_info(pafs.FileSelector(part_dir, allow_not_found=True)):
                    if not info.is_file or not info.base_name.endswith(".parquet") or info.path in committed:
                        continue
                    if info.mtime is not None and now - info.mtime.timestamp() < min_age_s:
                        continue
                    if older_than is not None and (info.mtime is None or info.mtime.timestamp() >= older_than):
                        continue
                    fs.delete_file(info.path)
                    removed += 1
                return removed

        return retry_call(clean, what=f"removing orphaned files of run {run_id}", where=self.url, policy=self.retry)

    def delete_run(self, run_id: str) -> int:
        """Remove every row of the run in one Delta commit; returns the number of files it removed.
        Their Parquet files stay until `remove_orphans` (older table versions still name them)."""
        check_run_id(run_id)  # also what makes the predicate below safe to build from the ID

        def drop() -> int:
            with self._lock:
                dt = self._load()
                if dt is None:
                    return 0
                metrics = dt.delete(f"{PARTITION} = '{run_id}'")
                self._committed.pop(run_id, None)
                self._own_version = None
                return int(metrics.get("num_removed_files", 0)) if isinstance(metrics, dict) else 0

        return retry_call(drop, what=f"deleting run {run_id}", where=self.url, policy=self.retry)

    # ---- internals -----------------------------------------------------------------------

    def _load(self) -> Any:
        """The Delta table brought up to date, or None if nothing was ever committed."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        if self._dt is not None:
            self._dt.update_incremental()
            return self._dt
        try:
            self._dt = DeltaTable(self.table_uri, storage_options=self._delta_options)
        except TableNotFoundError:
            return None
        return self._dt

    def _committed_ids_for_commit(self, run_id: str) -> set[str]:
        """The run's committed IDs before a commit: the cache, when the log shows no version after
        this object's last commit (one small existence check), else read from the table."""
        cache = self._committed.get(run_id)
        if cache is not None and self._own_version is not None and self._dt is not None:
            following = self.location.fs_path(f"{TABLE_DIR}/_delta_log/{self._own_version + 1:020d}.json")
            if self.filesystem.get_file_info(following).type == pafs.FileType.NotFound:
                return cache.ids
        return self._committed_ids(run_id)

    def _committed_ids(self, run_id: str) -> set[str]:
        """Episode IDs committed in the run; reads only data files it has not seen before."""
        dt = self._load()
        if dt is None:
            self._committed.pop(run_id, None)
            return set()
        dataset = dt.to_pyarrow_dataset(file_pruning_predicate=[(PARTITION, "=", run_id)])
        fragments = list(dataset.get_fragments())
        paths = {f.path for f in fragments}
        cache = self._committed.get(run_id)
        if cache is None or not cache.files <= paths:  # files removed (compaction, deletes): rescan
            cache = self._committed[run_id] = _CommittedIds()
        new = [f for f in fragments if f.path not in cache.files]
        for fragment in [f for f in new if f.path.rsplit("/", 1)[-1] in cache.own_files]:
            cache.files.add(fragment.path)
        new = [f for f in new if f.path not in cache.files]
        if new:
            subset = pads.FileSystemDataset(new, dataset.schema, dataset.format, dataset.filesystem)
            cache.ids.update(subset.to_table(columns=["episode_id"]).column(0).to_pylist())
            cache.files.update(f.path for f in new)
        return cache.ids


_STEP_FIELDS = frozenset(f.name for f in dataclasses.fields(StepRecord))


def episodes_to_arrow(episodes: list[EpisodeRecord]) -> pa.Table:
    """Same table as rollout.core.trajectory.episodes_to_table, built column by column (no per-row
    dataclasses.asdict): the per-row path is too slow for one committer to keep up with a job."""
    pairs = [(ep, step) for ep in episodes for step in ep.steps]
    columns = []
    for name in STEP_SCHEMA.names:
        if name in _STEP_FIELDS:
            values = [getattr(step, name) for _, step in pairs]
        elif name == "num_steps":
            values = [len(ep.steps) for ep, _ in pairs]
        elif name == "schema_version":
            values = [SCHEMA_VERSION] * len(pairs)
        else:
            values = [getattr(ep, name) for ep, _ in pairs]
        columns.append(pa.array(values, type=STEP_SCHEMA.field(name).type))
    return pa.Table.from_arrays(columns, schema=STEP_SCHEMA)


def _check_episodes(run_id: str, episodes: list[EpisodeRecord]) -> list[EpisodeRecord]:
    """Reject what cannot be stored faithfully; drop repeats of an ID within the batch."""
    if isinstance(episodes, EpisodeRecord):
        raise StoreError("write_episodes takes a list of EpisodeRecord, got a single EpisodeRecord")
    seen: dict[str, EpisodeRecord] = {}
    for i, ep in enumerate(episodes):
        if not isinstance(ep, EpisodeRecord):
            raise StoreError(f"episode #{i} is a {type(ep).__name__}, not an EpisodeRecord")
        if not ep.episode_id:
            raise StoreError(f"episode #{i} has an empty episode_id")
        if ep.run_id != run_id:
            raise StoreError(f"episode {ep.episode_id} belongs to run {ep.run_id!r}, not {run_id!r}")
        if not ep.steps:
            raise StoreError(f"episode {ep.episode_id} has no steps; the store keeps one row per step, "
                             f"so an episode without steps cannot be stored")
        seen.setdefault(ep.episode_id, ep)
    return list(seen.values())


def _uri_to_fs_path(uri: str) -> str:
    for scheme in ("s3://", "s3a://", "file://"):
        if uri.startswith(scheme):
            return uri[len(scheme):]
    return uri


def _check_table(run_id: str, table: pa.Table) -> tuple[pa.Table, int]:
    """STEP_SCHEMA columns (cast if needed), one run, whole episodes each present once."""
    if not isinstance(table, pa.Table):
        raise StoreError(f"write_table takes a pyarrow Table, got {type(table).__name__}")
    names = set(table.column_names)
    missing = [n for n in STEP_SCHEMA.names if n not in names]
    if missing:
        raise StoreError(f"the table lacks step-schema column(s): {', '.join(missing)}")
    if table.schema != STEP_SCHEMA:
        try:
            table = table.select(STEP_SCHEMA.names).cast(STEP_SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise StoreError(f"the table does not fit the step schema: {exc}") from exc
    if table.num_rows == 0:
        return table, 0
    runs = pc.unique(table.column("run_id")).to_pylist()
    if runs != [run_id]:
        raise StoreError(f"the table holds rows of run(s) {sorted(map(str, runs))}, not only {run_id!r}")
    per_episode = table.group_by("episode_id").aggregate(
        [("step", "count"), ("step", "count_distinct"), ("num_steps", "min"), ("num_steps", "max")])
    complete = pc.and_(pc.equal(per_episode["step_count"], per_episode["num_steps_min"]),
                       pc.and_(pc.equal(per_episode["step_count_distinct"], per_episode["step_count"]),
                               pc.equal(per_episode["num_steps_min"], per_episode["num_steps_max"])))
    if not pc.all(complete).as_py():
        bad = per_episode.filter(pc.invert(complete)).column("episode_id")[0].as_py()
        raise StoreError(f"episode {bad} is incomplete or repeated in the table (rows must be whole episodes, "
                         f"each once)")
    return table, per_episode.num_rows


def _conform(table: pa.Table, columns: list[str]) -> pa.Table:
    """Cast to STEP_SCHEMA types; columns a file predates (older schema_version) read as null."""
    arrays, names = [], []
    for name in columns:
        target = STEP_SCHEMA.field(name).type
        if name in table.column_names:
            arrays.append(table.column(name).cast(target))
        else:
            arrays.append(pa.nulls(table.num_rows, type=target))
        names.append(name)
    return pa.Table.from_arrays(arrays, schema=pa.schema([STEP_SCHEMA.field(n) for n in names]))

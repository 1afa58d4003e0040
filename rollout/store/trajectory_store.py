"""The trajectory store: the step table and the blob store behind one URL, plus run metadata.

Layout under the store URL (a directory or s3://bucket/prefix):

    steps/                  Delta table of step records (`steps_table.py`: Parquet + zstd,
                            partition run_id=<id>/, _delta_log/)
    runs/<run_id>.json      run metadata (RunMeta, in the blob store)
    models/<name>/...       trained models and manifests (`blobs.py`: `path_for`, `upload_dir`)

`TrajectoryStore` is the one object callers hold: it hands table calls to its `StepTable` and
object calls to its `BlobStore` (both share one filesystem client and one RetryPolicy) and
reads and writes run metadata, which needs both (`list_runs`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from rollout.core.trajectory import EpisodeRecord
from rollout.store.blobs import BlobStore
from rollout.store.location import StoreLocation, parse_location
from rollout.store.retry import DEFAULT_RETRY, RetryPolicy
from rollout.store.runs import RunInfo, RunMeta, check_run_id
from rollout.store.steps_table import StepTable

RUNS_DIR = "runs"


class TrajectoryStore:
    def __init__(self, url: str | os.PathLike[str], *, storage_options: dict[str, str] | None = None,
                 retry: RetryPolicy | None = None) -> None:
        self.location: StoreLocation = parse_location(url, storage_options)
        self.url = self.location.url
        self.retry = retry or DEFAULT_RETRY
        self.blobs = BlobStore(self.location, self.retry)
        self.steps = StepTable(self.location, self.retry, lambda: self.blobs.filesystem)
        self.table_uri = self.steps.table_uri

    def __repr__(self) -> str:
        return f"TrajectoryStore({self.url!r})"

    # ---- the step table ------------------------------------------------------------------

    def write_episodes(self, run_id: str, episodes: list[EpisodeRecord]) -> int:
        """Commit the episodes not yet in the run, atomically. Returns how many were new."""
        return self.steps.write_episodes(run_id, episodes)

    def write_table(self, run_id: str, table: pa.Table) -> int:
        """`write_episodes` for step rows already in Arrow form (whole episodes, each once)."""
        return self.steps.write_table(run_id, table)

    def episode_ids(self, run_id: str) -> set[str]:
        return self.steps.episode_ids(run_id)

    def read_table(self, run_ids: list[str] | None = None, columns: list[str] | None = None) -> pa.Table:
        """Committed step rows (all runs, or the given ones) in STEP_SCHEMA types and column order."""
        return self.steps.read_table(run_ids, columns)

    def read_episodes(self, run_ids: list[str] | None = None) -> list[EpisodeRecord]:
        return self.steps.read_episodes(run_ids)

    def data_files(self, run_ids: list[str] | None = None) -> list[str]:
        """URLs of the committed Parquet files, for readers that take a file list (ray.data, duckdb)."""
        return self.steps.data_files(run_ids)

    def version(self) -> int | None:
        """The Delta table version (one per commit); None before the first commit."""
        return self.steps.version()

    def remove_orphans(self, run_id: str, *, min_age_s: float = 0.0, older_than: float | None = None) -> int:
        """Delete the run's Parquet files no commit references (see `StepTable.remove_orphans`)."""
        return self.steps.remove_orphans(run_id, min_age_s=min_age_s, older_than=older_than)

    # ---- runs ----------------------------------------------------------------------------

    def write_run_meta(self, meta: RunMeta) -> None:
        check_run_id(meta.run_id)
        meta.updated_at = time.time()
        self.put_bytes(f"{RUNS_DIR}/{meta.run_id}.json", meta.to_json().encode())

    def read_run_meta(self, run_id: str) -> RunMeta | None:
        check_run_id(run_id)
        data = self.get_bytes(f"{RUNS_DIR}/{run_id}.json")
        return None if data is None else RunMeta.from_json(data.decode())

    def list_runs(self) -> list[RunInfo]:
        metas = {m.run_id: m for m in self._all_run_meta()}
        table = self.read_table(columns=["run_id", "episode_id", "num_steps", "success_validator",
                                         "success_oracle", "llm_backend", "policy_name", "created_at"])
        per_episode = table.group_by(["run_id", "episode_id"], use_threads=False).aggregate(
            [(c, "first") for c in ("num_steps", "success_validator", "success_oracle", "llm_backend",
                                    "policy_name", "created_at")])
        runs: dict[str, dict[str, Any]] = {}
        for row in per_episode.to_pylist():
            r = runs.setdefault(row["run_id"], {"episodes": 0, "steps": 0, "ok": 0, "gold": 0, "oracle_ok": 0,
                                                "backend": row["llm_backend_first"],
                                                "policy": row["policy_name_first"],
                                                "created": row["created_at_first"] or 0.0})
            r["episodes"] += 1
            r["steps"] += row["num_steps_first"] or 0
            r["ok"] += bool(row["success_validator_first"])
            if row["success_oracle_first"] is not None:
                r["gold"] += 1
                r["oracle_ok"] += bool(row["success_oracle_first"])
            r["created"] = min(r["created"], row["created_at_first"] or r["created"])
        out: list[RunInfo] = []
        for run_id in sorted(set(runs) | set(metas)):
            r = runs.get(run_id, {"episodes": 0, "steps": 0, "ok": 0, "gold": 0, "oracle_ok": 0,
                                  "backend": "", "policy": "", "created": 0.0})
            meta = metas.get(run_id)
            out.append(RunInfo(
                run_id=run_id,
                status=meta.status if meta else "unknown",
                episodes=r["episodes"],
                steps=r["steps"],
                success_validator=r["ok"] / r["episodes"] if r["episodes"] else 0.0,
                success_oracle=r["oracle_ok"] / r["gold"] if r["gold"] else None,
                llm_backend=(meta.llm_backend if meta and meta.llm_backend else r["backend"]) or "",
                policy=(meta.policy if meta and meta.policy else r["policy"]) or "",
                episodes_requested=meta.episodes_requested if meta else r["episodes"],
                quarantined=len(meta.quarantined) if meta else 0,
                created_at=meta.created_at if meta else r["created"],
            ))
        return sorted(out, key=lambda info: info.created_at)

    def _all_run_meta(self) -> list[RunMeta]:
        return [RunMeta.from_json(data.decode()) for data in self.blobs.read_all(RUNS_DIR, ".json")]

    # ---- the blob store (models, manifests, events) --------------------------------------

    @property
    def filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem for the store; pair it with `fs_path(relative)`."""
        return self.blobs.filesystem

    def fs_path(self, relative: str) -> str:
        return self.blobs.fs_path(relative)

    def path_for(self, relative: str) -> str:
        """URL of a path in the store, e.g. path_for("models/policy-v3") -> s3://bucket/prefix/models/policy-v3."""
        return self.blobs.path_for(relative)

    def put_bytes(self, relative: str, data: bytes) -> None:
        """Write a whole object atomically (S3 PUT; local: temp file + rename)."""
        self.blobs.put_bytes(relative, data)

    def get_bytes(self, relative: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        return self.blobs.get_bytes(relative)

    def exists(self, relative: str) -> bool:
        return self.blobs.exists(relative)

    def upload_dir(self, local_dir: str | os.PathLike[str], relative: str) -> list[str]:
        """Copy a local directory into the store (e.g. a trained model) and return the copied paths."""
        return self.blobs.upload_dir(local_dir, relative)

    def download_dir(self, relative: str, local_dir: str | os.PathLike[str]) -> list[Path]:
        """Copy a store directory to a local one; raises FileNotFoundError when it is empty or missing."""
        return self.blobs.download_dir(relative, local_dir)

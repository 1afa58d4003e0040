"""The blob store: whole objects under the store URL (run metadata, models, manifests, loop
events) written atomically (S3 PUT; local: temp file + rename), read, listed and copied as
directories. Every call retries storage outages with the store's RetryPolicy."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import pyarrow.fs as pafs

from rollout.store.location import StoreLocation
from rollout.store.retry import RetryPolicy, retry_call


class BlobStore:
    def __init__(self, location: StoreLocation, retry: RetryPolicy) -> None:
        self.location = location
        self.url = location.url
        self.retry = retry
        self._fs: pafs.FileSystem | None = None

    @property
    def filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem for the store; pair it with `fs_path(relative)`."""
        if self._fs is None:
            self._fs = self.location.filesystem()
        return self._fs

    def fs_path(self, relative: str) -> str:
        return self.location.fs_path(relative)

    def path_for(self, relative: str) -> str:
        """URL of a path in the store, e.g. path_for("models/policy-v3") -> s3://bucket/prefix/models/policy-v3."""
        return self.location.join(relative)

    def put_bytes(self, relative: str, data: bytes) -> None:
        """Write a whole object atomically (S3 PUT; local: temp file + rename)."""
        path = self.location.fs_path(relative)

        def put() -> None:
            fs = self.filesystem
            parent = path.rsplit("/", 1)[0]
            fs.create_dir(parent, recursive=True)
            if self.location.is_s3:
                with fs.open_output_stream(path) as f:
                    f.write(data)
                return
            tmp = f"{parent}/.{Path(path).name}.{uuid.uuid4().hex}.tmp"
            try:
                with fs.open_output_stream(tmp) as f:
                    f.write(data)
                fs.move(tmp, path)
            finally:
                with contextlib.suppress(OSError):
                    if fs.get_file_info(tmp).type != pafs.FileType.NotFound:
                        fs.delete_file(tmp)

        retry_call(put, what=f"writing {relative}", where=self.url, policy=self.retry)

    def get_bytes(self, relative: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        path = self.location.fs_path(relative)

        def get() -> bytes | None:
            try:
                with self.filesystem.open_input_stream(path) as f:
                    return f.read()
            except FileNotFoundError:
                return None

        return retry_call(get, what=f"reading {relative}", where=self.url, policy=self.retry)

    def exists(self, relative: str) -> bool:
        path = self.location.fs_path(relative)
        return retry_call(lambda: self.filesystem.get_file_info(path).type != pafs.FileType.NotFound,
                          what=f"checking {relative}", where=self.url, policy=self.retry)

    def upload_dir(self, local_dir: str | os.PathLike[str], relative: str) -> list[str]:
        """Copy a local directory into the store (e.g. a trained model) and return the copied paths."""
        root = Path(local_dir)
        if not root.is_dir():
            raise NotADirectoryError(f"{root} is not a directory")
        copied = []
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = f"{relative.strip('/')}/{path.relative_to(root).as_posix()}"
            self.put_bytes(rel, path.read_bytes())
            copied.append(rel)
        return copied

    def download_dir(self, relative: str, local_dir: str | os.PathLike[str]) -> list[Path]:
        """Copy a store directory to a local one; raises FileNotFoundError when it is empty or missing."""
        base = self.location.fs_path(relative)

        def listing() -> list[pafs.FileInfo]:
            return self.filesystem.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))

        infos = [i for i in retry_call(listing, what=f"listing {relative}", where=self.url, policy=self.retry)
                 if i.is_file]
        if not infos:
            raise FileNotFoundError(f"nothing stored under {self.path_for(relative)}")
        out = []
        for info in infos:
            rel = info.path[len(base):].lstrip("/")
            target = Path(local_dir) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            data = self.get_bytes(f"{relative.strip('/')}/{rel}")
            target.write_bytes(data or b"")
            out.append(target)
        return out

    def read_all(self, relative: str, suffix: str) -> list[bytes]:
        """The contents of every file directly under `relative` whose name ends with `suffix`."""
        def read() -> list[bytes]:
            fs = self.filesystem
            out = []
            for info in fs.get_file_info(pafs.FileSelector(self.location.fs_path(relative), allow_not_found=True)):
                if info.is_file and info.base_name.endswith(suffix):
                    with fs.open_input_stream(info.path) as f:
                        out.append(f.read())
            return out
        return retry_call(read, what=f"listing {relative}", where=self.url, policy=self.retry)

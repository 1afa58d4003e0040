"""Where a served model comes from: a local directory, a file:// URL or an s3:// prefix.

S3 models are copied into a local cache directory first (boto3 honours AWS_ENDPOINT_URL, so any
S3-compatible store works); the manifest is then read from the local copy.

A model named over the admin API is confined (`ModelRoots`): it must lie under a configured root
(local directories, s3:// prefixes), checked before anything is read, with one answer for every
outside path whether it exists or not. Before an S3 model is downloaded, the prefix's listing is
checked against the size caps and its manifest is fetched and verified; a download that fails
any check is removed. `check_npz` refuses weights that would inflate past a cap when loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from solvers.errors import InputError

DEFAULT_CACHE = Path(os.environ.get("HALO_MODEL_CACHE", "~/.cache/halo")).expanduser() / "served-models"
MANIFEST_NAME = "manifest.json"
MAX_MANIFEST_BYTES = 1_000_000


class ModelSourceError(InputError, FileNotFoundError):
    pass


class ModelOutsideRoots(ModelSourceError):
    """A model reference outside the configured roots (refused before anything is read)."""


@dataclass(frozen=True)
class SizeLimits:
    max_file_bytes: int = 2_000_000_000  # per artifact file
    max_total_bytes: int = 2_000_000_000  # the whole model
    max_npz_inflated_bytes: int = 512_000_000  # what one .npz may decompress to


@dataclass(frozen=True)
class ModelRoots:
    """Local directories and (bucket, key prefix) pairs a model may come from."""

    local: tuple[Path, ...] = ()
    s3: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, roots: Iterable[str]) -> ModelRoots:
        local: list[Path] = []
        s3: list[tuple[str, str]] = []
        for root in roots:
            if not root.strip():
                continue
            parsed = urlparse(root)
            if parsed.scheme == "s3":
                prefix = parsed.path.strip("/")
                s3.append((parsed.netloc, prefix + "/" if prefix else ""))
            elif parsed.scheme in ("", "file"):
                local.append(Path(os.path.realpath(Path(parsed.path if parsed.scheme else root).expanduser())))
            else:
                raise ModelSourceError(f"model root {root!r}: want a directory, file:// or s3:// prefix")
        return cls(tuple(local), tuple(s3))

    def admits(self, ref: str) -> bool:
        parsed = urlparse(ref)
        if parsed.scheme == "s3":
            prefix = parsed.path.strip("/") + "/"
            return any(parsed.netloc == bucket and prefix.startswith(root) for bucket, root in self.s3)
        if parsed.scheme not in ("", "file"):
            return False
        # realpath follows symlinks (and /proc/self/cwd) to where the bytes are; it answers the
        # same for paths that exist and paths that do not
        path = Path(os.path.realpath(Path(parsed.path if parsed.scheme else ref).expanduser()))
        return any(path == root or root in path.parents for root in self.local)

    def check(self, ref: str) -> None:
        if not self.admits(ref):
            raise ModelOutsideRoots("the model is not under a configured model root (model_roots); "
                                   "nothing was read")


def resolve_model(ref: str, cache_dir: str | Path | None = None, *, roots: ModelRoots | None = None,
                  limits: SizeLimits | None = None) -> Path:
    """Return a local directory holding the model named by `ref` (confined to `roots` when given)."""
    if not ref:
        raise ModelSourceError("no model given (pass a model directory or a store URL)")
    if roots is not None:
        roots.check(ref)
    parsed = urlparse(ref)
    if parsed.scheme in ("", "file"):
        path = Path(parsed.path if parsed.scheme == "file" else ref).expanduser()
        if not path.is_dir():
            raise ModelSourceError(f"model directory {path} does not exist")
        return path.resolve()
    if parsed.scheme == "s3":
        return _download_s3(parsed.netloc, parsed.path.lstrip("/"), Path(cache_dir) if cache_dir else DEFAULT_CACHE,
                            limits or SizeLimits())
    raise ModelSourceError(f"unsupported model URL scheme {parsed.scheme!r} (want a directory, file:// or s3://)")


def _listing(client: object, bucket: str, prefix: str, limits: SizeLimits) -> list[tuple[str, int]]:
    """(key, size) of every object under the prefix, refused when a size is over its cap."""
    objects: list[tuple[str, int]] = []
    total = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):  # type: ignore[attr-defined]
        for obj in page.get("Contents", []):
            size = int(obj.get("Size", 0))
            if size > limits.max_file_bytes:
                raise ModelSourceError(f"s3://{bucket}/{obj['Key']} is {size:,} bytes, over the "
                                       f"{limits.max_file_bytes:,}-byte cap per artifact file")
            total += size
            if total > limits.max_total_bytes:
                raise ModelSourceError(f"s3://{bucket}/{prefix} holds over {limits.max_total_bytes:,} bytes "
                                       "(max_model_bytes)")
            objects.append((obj["Key"], size))
    return objects


def _check_manifest(client: object, bucket: str, prefix: str, objects: list[tuple[str, int]]) -> None:
    """Fetch and verify manifest.json before anything else is downloaded."""
    from train.manifest import Manifest, ManifestError

    sizes = dict(objects)
    key = prefix + MANIFEST_NAME
    if key not in sizes:
        raise ModelSourceError(f"s3://{bucket}/{prefix} has no {MANIFEST_NAME} (not a HALO model)")
    if sizes[key] > MAX_MANIFEST_BYTES:
        raise ModelSourceError(f"s3://{bucket}/{key} is over {MAX_MANIFEST_BYTES:,} bytes")
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read(MAX_MANIFEST_BYTES + 1)  # type: ignore[attr-defined]
    try:
        Manifest.from_dict(json.loads(body)).verify()
    except (ValueError, ManifestError) as exc:
        raise ManifestError(f"s3://{bucket}/{key}: {exc}") from None


def _download_s3(bucket: str, prefix: str, cache: Path, limits: SizeLimits) -> Path:
    import boto3

    prefix = prefix.rstrip("/") + "/" if prefix else ""
    client = boto3.client("s3")
    objects = _listing(client, bucket, prefix, limits)
    if not objects:
        raise ModelSourceError(f"s3://{bucket}/{prefix} holds no objects")
    _check_manifest(client, bucket, prefix, objects)
    out = cache / hashlib.sha256(f"s3://{bucket}/{prefix}".encode()).hexdigest()[:20]
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for key, _ in objects:
            rel = key[len(prefix):]
            if not rel or rel.endswith("/"):
                continue
            dest = tmp / rel
            if tmp.resolve() not in dest.resolve().parents:
                raise ModelSourceError(f"s3 key {key!r} escapes the model directory")
            dest.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, key, str(dest))
            if dest.stat().st_size > limits.max_file_bytes:  # the object changed since it was listed
                raise ModelSourceError(f"s3://{bucket}/{key} grew past the {limits.max_file_bytes:,}-byte cap")
        check_npz_files(tmp, limits)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing refused stays cached
        raise
    # Replace any older copy: the prefix may have been overwritten with a new version.
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def check_npz_files(model_dir: Path, limits: SizeLimits) -> None:
    for path in sorted(model_dir.rglob("*.npz")):
        check_npz(path, limits.max_npz_inflated_bytes)


def check_npz(path: Path, max_inflated: int) -> None:
    """Refuse an .npz that would take more than `max_inflated` bytes once loaded: each member's
    declared size and its .npy header's shape are read, never its data."""
    declared = arrays = 0
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                declared += info.file_size
                if info.filename.endswith(".npy"):
                    arrays += _npy_bytes(archive, info)
                if max(declared, arrays) > max_inflated:
                    break
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ModelSourceError(f"{path}: not a readable .npz ({type(exc).__name__})") from None
    if max(declared, arrays) > max_inflated:
        raise ModelSourceError(f"{path.name} would inflate past {max_inflated:,} bytes when loaded "
                               "(max_npz_inflated_bytes): refused")


def _npy_bytes(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """The bytes the array of one .npy member takes, from its header alone."""
    import numpy as np
    from numpy.lib import format as npy_format

    with archive.open(info) as member:
        version = npy_format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = npy_format.read_array_header_1_0(member)
        elif version == (2, 0):
            shape, _, dtype = npy_format.read_array_header_2_0(member)
        else:
            raise ValueError(f"npy format {version} not accepted")
    return int(np.prod(shape, dtype=np.float64)) * max(1, dtype.itemsize)

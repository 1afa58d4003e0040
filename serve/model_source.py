"""Where a served model comes from: a local directory, a file:// URL or an s3:// prefix.

S3 models are copied into a local cache directory first (boto3 honours AWS_ENDPOINT_URL, so any
S3-compatible store works); the manifest is then read from the local copy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from urllib.parse import urlparse

DEFAULT_CACHE = Path(os.environ.get("HALO_MODEL_CACHE", "~/.cache/halo")).expanduser() / "served-models"


class ModelSourceError(FileNotFoundError):
    pass


def resolve_model(ref: str, cache_dir: str | Path | None = None) -> Path:
    """Return a local directory holding the model named by `ref`."""
    if not ref:
        raise ModelSourceError("no model given (pass a model directory or a store URL)")
    parsed = urlparse(ref)
    if parsed.scheme in ("", "file"):
        path = Path(parsed.path if parsed.scheme == "file" else ref).expanduser()
        if not path.is_dir():
            raise ModelSourceError(f"model directory {path} does not exist")
        return path.resolve()
    if parsed.scheme == "s3":
        return _download_s3(parsed.netloc, parsed.path.lstrip("/"), Path(cache_dir) if cache_dir else DEFAULT_CACHE)
    raise ModelSourceError(f"unsupported model URL scheme {parsed.scheme!r} (want a directory, file:// or s3://)")


def _download_s3(bucket: str, prefix: str, cache: Path) -> Path:
    import boto3

    prefix = prefix.rstrip("/") + "/" if prefix else ""
    client = boto3.client("s3")
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(obj["Key"] for obj in page.get("Contents", []))
    if not keys:
        raise ModelSourceError(f"s3://{bucket}/{prefix} holds no objects")
    out = cache / hashlib.sha256(f"s3://{bucket}/{prefix}".encode()).hexdigest()[:20]
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for key in keys:
        rel = key[len(prefix):]
        if not rel or rel.endswith("/"):
            continue
        dest = tmp / rel
        if tmp.resolve() not in dest.resolve().parents:
            raise ModelSourceError(f"s3 key {key!r} escapes the model directory")
        dest.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(dest))
    # Replace any older copy: the prefix may have been overwritten with a new version.
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out

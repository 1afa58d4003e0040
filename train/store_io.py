"""Artifacts in the store: `--out` may be a local directory or a store URL such as
s3://bucket/prefix/models/NAME. Store URLs are trained into a local staging directory (which
also holds the checkpoints a later run resumes from) and uploaded when training ends."""

from __future__ import annotations

import hashlib
from pathlib import Path

from train.base_models import DEFAULT_CACHE

MODELS_MARK = "/models/"


def is_remote(out: str) -> bool:
    return "://" in out


def stage_output(out: str) -> Path:
    if not is_remote(out):
        return Path(out)
    if MODELS_MARK not in out:
        raise ValueError(f"--out {out}: a store URL must look like STORE/models/NAME")
    name = out.rstrip("/").rsplit("/", 1)[-1]
    digest = hashlib.sha1(out.encode()).hexdigest()[:8]
    return DEFAULT_CACHE / "staging" / f"{name}-{digest}"


def upload_output(local: Path, out: str) -> str:
    if not is_remote(out):
        return str(local)
    from rollout.store import TrajectoryStore

    store_url, _, name = out.rstrip("/").rpartition(MODELS_MARK)
    TrajectoryStore(store_url).upload_dir(local, f"models/{name}")
    return out

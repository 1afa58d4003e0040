"""Copying a model artifact into the store, manifest last, so a reader that finds the manifest
finds a complete artifact (the loop's candidates, `publish_as`, `halo loop publish`)."""

from __future__ import annotations

from pathlib import Path

from rollout.store import TrajectoryStore
from train.manifest import MANIFEST_FILE, Manifest


def upload_model(store: TrajectoryStore, model_dir: Path, relative: str) -> None:
    files = sorted(p for p in model_dir.rglob("*") if p.is_file() and p.name != MANIFEST_FILE)
    for path in [*files, model_dir / MANIFEST_FILE]:
        store.put_bytes(f"{relative.strip('/')}/{path.relative_to(model_dir).as_posix()}", path.read_bytes())


def publish_model(store: TrajectoryStore, model_dir: str | Path, relative: str) -> tuple[str, Manifest]:
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ValueError(f"{model_dir}: not a model directory")
    manifest = Manifest.load(model_dir)  # refuses a model whose manifest does not verify
    if manifest.policy_class == "hashed_linear":  # cheap to load: refuse unreadable weights too
        from train.policies import load_policy

        load_policy(model_dir).close()
    upload_model(store, model_dir, relative)
    return store.path_for(relative), manifest

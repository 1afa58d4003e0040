"""The model manifest: what a trained policy artifact is, and how to check it before use.

Every artifact directory (LLM adapter or fast policy) holds `manifest.json` in this format.
Serving refuses a model whose manifest does not verify; the online loop records manifests in
its event log so any served version traces back to its data.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rollout.core.agent_table import AGENT_IDS, NUM_AGENTS
from solvers.errors import InputError

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1


class ManifestError(InputError, ValueError):
    pass


@dataclass
class Manifest:
    name: str
    version: str
    policy_class: str  # "llm" | "hashed_linear" | "encoder" | ...
    label_map: dict[int, str]  # agent ID -> label string (one token for LLM policies)
    encoder_version: str
    base_model: str = ""
    data_versions: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    created_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    format: int = MANIFEST_FORMAT

    def to_json(self) -> str:
        data = asdict(self)
        data["label_map"] = {str(k): v for k, v in self.label_map.items()}
        return json.dumps(data, indent=2, sort_keys=True)

    def save(self, model_dir: Path) -> Path:
        path = Path(model_dir) / MANIFEST_FILE
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, model_dir: str | Path) -> Manifest:
        path = Path(model_dir) / MANIFEST_FILE
        if not path.is_file():
            raise ManifestError(f"{path}: no manifest (not a HALO model directory?)")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ManifestError(f"{path}: malformed manifest: {exc}") from exc
        try:
            manifest = cls.from_dict(data)
            manifest.verify()
        except ManifestError as exc:
            raise ManifestError(f"{path}: {exc}") from None
        return manifest

    @classmethod
    def from_dict(cls, data: Any) -> Manifest:
        """Type-check every field (a wrong type must be refused here, not break serving later)."""
        if not isinstance(data, dict):
            raise ManifestError("a manifest is a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ManifestError(f"unknown manifest field(s): {', '.join(unknown)}")
        missing = sorted(f.name for f in fields(cls)
                         if f.default is MISSING and f.default_factory is MISSING and f.name not in data)
        if missing:
            raise ManifestError(f"missing manifest field(s): {', '.join(missing)}")
        for name in ("name", "version", "policy_class", "encoder_version", "base_model"):
            if name in data and not isinstance(data[name], str):
                raise ManifestError(f"{name}: must be a string")
        for name in ("name", "version", "policy_class"):
            if not data[name].strip():
                raise ManifestError(f"{name}: must not be empty")
        labels = data["label_map"]
        if not isinstance(labels, dict) or not all(isinstance(k, str) and k.isdigit() and isinstance(v, str)
                                                   for k, v in labels.items()):
            raise ManifestError('label_map: must map agent IDs ("0".."20") to label strings')
        if not isinstance(data.get("data_versions", []), list) or not all(
                isinstance(v, str) for v in data.get("data_versions", [])):
            raise ManifestError("data_versions: must be a list of strings")
        metrics = data.get("metrics", {})
        if not isinstance(metrics, dict) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in metrics.values()):
            raise ManifestError("metrics: must map names to numbers")
        created = data.get("created_at", 0.0)
        if not isinstance(created, int | float) or isinstance(created, bool):
            raise ManifestError("created_at: must be a number")
        if not isinstance(data.get("extra", {}), dict):
            raise ManifestError("extra: must be an object")
        fmt = data.get("format", MANIFEST_FORMAT)
        if not isinstance(fmt, int) or isinstance(fmt, bool):
            raise ManifestError("format: must be an integer")
        return cls(**{**data, "label_map": {int(k): v for k, v in labels.items()}})

    def verify(self) -> None:
        if self.format != MANIFEST_FORMAT:
            raise ManifestError(f"manifest format {self.format} unsupported (want {MANIFEST_FORMAT})")
        if sorted(self.label_map) != list(AGENT_IDS):
            raise ManifestError("label_map must cover agent IDs 0..20 exactly")
        if len(set(self.label_map.values())) != NUM_AGENTS:
            raise ManifestError("label_map labels must be distinct")

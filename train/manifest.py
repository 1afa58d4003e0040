"""The model manifest: what a trained policy artifact is, and how to check it before use.

Every artifact directory (LLM adapter or fast policy) holds `manifest.json` in this format.
Serving refuses a model whose manifest does not verify; the online loop records manifests in
its event log so any served version traces back to its data.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1


class ManifestError(ValueError):
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
            data["label_map"] = {int(k): str(v) for k, v in data["label_map"].items()}
            manifest = cls(**data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{path}: malformed manifest: {exc}") from exc
        manifest.verify()
        return manifest

    def verify(self) -> None:
        if self.format != MANIFEST_FORMAT:
            raise ManifestError(f"manifest format {self.format} unsupported (want {MANIFEST_FORMAT})")
        if sorted(self.label_map) != list(range(21)):
            raise ManifestError("label_map must cover agent IDs 0..20 exactly")
        if len(set(self.label_map.values())) != 21:
            raise ManifestError("label_map labels must be distinct")

"""Per-model token prices, in US dollars per million tokens, from a dict or a YAML file.

YAML shape:

    default: {input: 0.0, output: 0.0}     # optional, for models not listed
    models:
      gpt-5-mini: {input: 0.25, output: 2.0}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Price:
    input_per_m: float = 0.0
    output_per_m: float = 0.0


@dataclass(frozen=True)
class PriceTable:
    models: dict[str, Price] = field(default_factory=dict)
    default: Price = Price()

    def price(self, model: str) -> Price:
        if model in self.models:
            return self.models[model]
        # Dated snapshots ("gpt-x-2025-01-01") fall back to the longest listed prefix.
        matches = [m for m in self.models if model.startswith(m)]
        return self.models[max(matches, key=len)] if matches else self.default

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float:
        p = self.price(model)
        return (tokens_in * p.input_per_m + tokens_out * p.output_per_m) / 1_000_000

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PriceTable:
        if not isinstance(data, dict):
            raise ValueError("price table: must be a mapping with 'models' (and optional 'default')")
        models = {}
        for name, entry in (data.get("models") or {}).items():
            models[str(name)] = _price(f"models.{name}", entry)
        default = _price("default", data["default"]) if "default" in data else Price()
        return cls(models, default)

    @classmethod
    def from_yaml(cls, path: str | Path) -> PriceTable:
        return cls.from_dict(yaml.safe_load(Path(path).read_text()) or {})


def _price(where: str, entry: Any) -> Price:
    if not isinstance(entry, dict):
        raise ValueError(f"price table: {where} must be a mapping with 'input' and 'output'")
    try:
        return Price(float(entry.get("input", 0.0)), float(entry.get("output", 0.0)))
    except (TypeError, ValueError):
        raise ValueError(f"price table: {where}: input/output must be numbers") from None

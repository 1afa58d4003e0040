"""`--llm SPEC`: which LLM the agents use, as a typed spec.

    sim[:key=value,...]        the simulated agent world (its keys: rollout.sim.spec.SimSpec)
    openai:MODEL               an OpenAI-compatible endpoint, its URL from HALO_LLM_BASE_URL
    openai:MODEL@BASE_URL      ... at BASE_URL

`LLMSpec.parse` reads the shape; the simulated world's parameters are read by the package that
owns them (`rollout.sim.spec.SimSpec.parse`), and the backend an episode gets is chosen in
`rollout.loop.backends.agent_backend_for`.
"""

from __future__ import annotations

from dataclasses import dataclass

from solvers.params import SpecError, split_spec

KINDS = ("sim", "openai")
_USAGE = ("use sim[:realtime=1,latency_ms=...,latency_sigma=...], openai:MODEL or openai:MODEL@BASE_URL "
          "(base URL and key may also come from HALO_LLM_BASE_URL / HALO_LLM_API_KEY)")



class LLMSpecError(SpecError):
    """An --llm spec that names no backend."""


@dataclass(frozen=True)
class LLMSpec:
    text: str  # the spec as given (stripped)
    kind: str  # "sim" or "openai"
    model: str | None = None  # openai: the model name
    base_url: str | None = None  # openai: the endpoint, None: from the environment
    params: str = ""  # sim: the `key=value,...` text after "sim:"

    @property
    def is_sim(self) -> bool:
        return self.kind == "sim"

    @property
    def backend(self) -> str:
        """How records and run metadata name the backend: "sim" or "openai:MODEL"."""
        return "sim" if self.is_sim else f"openai:{self.model}"

    @classmethod
    def parse(cls, spec: str) -> LLMSpec:
        text = spec.strip()
        kind, rest = split_spec(text)
        if is_sim_spec(text):
            return cls(text, "sim", params=rest)
        if kind != "openai":
            raise LLMSpecError.of(text, f"unknown backend {kind!r}; {_USAGE}", field="kind", known=KINDS, what="--llm")
        if not rest:
            raise LLMSpecError.of(text, f"openai needs a model; {_USAGE}", field="model", known=KINDS, what="--llm")
        model, _, url = rest.partition("@")
        return cls(text, "openai", model=model, base_url=url or None)


def is_sim_spec(spec: str) -> bool:
    spec = spec.strip()
    return spec == "sim" or spec.startswith("sim:")


__all__ = ["KINDS", "LLMSpec", "LLMSpecError", "is_sim_spec"]

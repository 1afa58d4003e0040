"""`--llm sim[:key=value,...]`: the simulated world's parameters on the command line.

    sim                                    today's default: latencies drawn, slept at 0.001x (CI speed)
    sim:realtime=1                         sleep the simulated latency in full (median 2.5 s)
    sim:realtime=1,latency_ms=800,latency_sigma=0.3
    sim:realtime=1,base_url=http://127.0.0.1:PORT/v1
                                           each simulated call also goes over HTTP to an
                                           OpenAI-protocol server that answers after the simulated
                                           latency (the real client stack: pool, retries, 429s)
    sim:world=FILE                         another world: every parameter of the simulated world and
                                           its prompted teachers from a world file (rollout/sim/
                                           default_world.yaml is the default; `halo sim world --dump`)

`scale=X` sets the sleep factor itself (it wins over `realtime`). The outcomes stay the simulated
world's (records are labelled llm_backend=sim either way). The keys are `SimParams`' fields, read
by the one spec parser (solvers/params.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from rollout.llm.spec import LLMSpec, is_sim_spec
from rollout.sim.backend import SimAgents, sim_backend
from rollout.sim.world import SimConfig
from solvers.params import SpecError, keys_of, read_pairs, read_params

_AT_LEAST_0 = {"ge": 0}


def _http_url(value: str) -> str:
    return "" if value.startswith(("http://", "https://")) else "must be an http(s) URL"


class SimSpecError(SpecError):
    pass


@dataclass(frozen=True)
class SimParams:
    """The keys of `--llm sim:...`; unset keys keep the world's value."""

    world: str | None = None  # a world file
    realtime: bool | None = None  # sleep the simulated latency in full
    latency_ms: float | None = field(default=None, metadata=_AT_LEAST_0)  # the median latency
    latency_sigma: float | None = field(default=None, metadata=_AT_LEAST_0)
    scale: float | None = field(default=None, metadata=_AT_LEAST_0)  # real sleep = simulated latency x this
    base_url: str | None = field(default=None, metadata={"check": _http_url})
    model: str | None = None  # the model name the HTTP calls carry

    def applied_to(self, config: SimConfig) -> SimConfig:
        """`config` with these run settings on top (the world file itself is read by `SimSpec.parse`)."""
        changes: dict[str, float] = {}
        if self.realtime:
            changes["latency_scale"] = 1.0
        for key, name in (("latency_ms", "latency_median_ms"), ("latency_sigma", "latency_sigma"),
                          ("scale", "latency_scale")):
            if getattr(self, key) is not None:
                changes[name] = getattr(self, key)
        return replace(config, **changes) if changes else config


KNOWN_KEYS = keys_of(SimParams)


@dataclass(frozen=True)
class SimSpec:
    """A parsed `--llm sim...` spec: the world to run in and how its calls travel."""

    config: SimConfig
    base_url: str | None = None  # simulated calls travel over HTTP to this OpenAI-protocol endpoint
    model: str = "sim-frontier-mini"

    @property
    def realtime(self) -> bool:
        return self.config.latency_scale >= 1.0

    @classmethod
    def parse(cls, spec: str | LLMSpec) -> SimSpec:
        """"sim" or "sim:key=value,..." -> SimSpec; a one-line SimSpecError for anything else."""
        text = spec.text if isinstance(spec, LLMSpec) else spec.strip()
        if not is_sim_spec(text):
            raise SimSpecError.of(text, "not a sim spec", what="--llm")
        params = read_params(SimParams, text.partition(":")[2], spec=text, what="--llm", error=SimSpecError)
        config = params.applied_to(_world_config(params.world, text))  # the world first, the run's settings on top
        if params.base_url is not None and config.latency_scale < 1.0:
            raise SimSpecError.of(text, "base_url needs realtime=1 (the server sleeps the full simulated latency)",
                                  field="base_url", known=KNOWN_KEYS, what="--llm")
        return cls(config=config, base_url=params.base_url, model=params.model or config.model)


SimOptions = SimSpec  # the name callers used before the typed specs


def parse_sim_spec(spec: str) -> SimSpec:
    return SimSpec.parse(spec)


def _world_config(path: str | None, spec: str) -> SimConfig:
    if path is None:
        return SimConfig()
    from rollout.sim.world_file import WorldFileError, load_world

    try:
        return SimConfig.from_world(load_world(path))
    except WorldFileError as exc:
        raise SimSpecError.of(spec, f"world: {exc}", field="world", known=KNOWN_KEYS, what="--llm") from None


def absolute_world_spec(spec: str) -> str:
    """The spec with a relative `world=FILE` made absolute (other specs unchanged)."""
    if not is_sim_spec(spec):
        return spec
    text = spec.strip()
    pairs = read_pairs(text.partition(":")[2], known=KNOWN_KEYS, spec=text, what="--llm", error=SimSpecError)
    if not any(p.key == "world" for p in pairs):
        return spec
    parts = [f"world={Path(p.value).expanduser().resolve()}" if p.key == "world" else f"{p.key}={p.value}"
             for p in pairs]
    return f"sim:{','.join(parts)}"


def read_llm_spec(spec: str) -> LLMSpec:
    """The --llm spec, with a sim spec's own parameters checked too (a bad one fails here, once)."""
    llm = LLMSpec.parse(spec)
    if llm.is_sim:
        SimSpec.parse(llm)
    return llm


def sim_agents(spec: LLMSpec, pool: int | None) -> SimAgents:
    """The simulated world as an agent backend (rollout.loop.backends.SPEC_BACKENDS["sim"]); with a
    base_url its calls' waits go over HTTP, on one client of `pool` connections."""
    from rollout.llm import LLMConfig, OpenAIChatClient

    sim = SimSpec.parse(spec)
    transport = None
    if sim.base_url is not None:
        transport = OpenAIChatClient(LLMConfig(base_url=sim.base_url, model=sim.model, max_concurrency=pool or 512,
                                               timeout_s=600.0, max_attempts=8))
    return sim_backend(sim.config, transport)


def world_label(config: SimConfig) -> str:
    """How reports name a world: "default a6d60f90bf058600"."""
    return f"{config.world_name} {config.world_hash}"


def sim_config_for(spec: str) -> SimConfig:
    """The SimConfig of a sim spec ("sim", "sim:world=FILE,..."): for commands that run episodes in-process."""
    return SimSpec.parse(spec).config


__all__ = ["KNOWN_KEYS", "SimParams", "SimSpec", "SimSpecError", "absolute_world_spec", "is_sim_spec",
           "parse_sim_spec", "read_llm_spec", "sim_agents", "sim_config_for", "world_label"]

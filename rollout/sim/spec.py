"""`--llm sim[:key=value,...]`: the simulated world's parameters on the command line.

    sim                                    today's default: latencies drawn, slept at 0.001x (CI speed)
    sim:realtime=1                         sleep the simulated latency in full (median 2.5 s)
    sim:realtime=1,latency_ms=800,latency_sigma=0.3
    sim:realtime=1,base_url=http://127.0.0.1:PORT/v1
    sim:world=FILE                         another world: every parameter of the simulated world and
                                           its prompted teachers from a world file (rollout/sim/
                                           default_world.yaml is the default; `halo sim world --dump`)
                                           each simulated call also goes over HTTP to an
                                           OpenAI-protocol server that answers after the simulated
                                           latency (the real client stack: pool, retries, 429s)

The outcomes stay the simulated world's (records are labelled llm_backend=sim either way).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rollout.sim.world import SimConfig
from solvers.errors import InputError

_FLOAT_KEYS = {"latency_ms": "latency_median_ms", "latency_sigma": "latency_sigma", "scale": "latency_scale"}
KNOWN_KEYS = ("world", "realtime", "latency_ms", "latency_sigma", "scale", "base_url", "model")


class SimSpecError(InputError, ValueError):
    pass


@dataclass(frozen=True)
class SimOptions:
    config: SimConfig
    base_url: str | None = None  # simulated calls travel over HTTP to this OpenAI-protocol endpoint
    model: str = "sim-frontier-mini"

    @property
    def realtime(self) -> bool:
        return self.config.latency_scale >= 1.0


def is_sim_spec(spec: str) -> bool:
    spec = spec.strip()
    return spec == "sim" or spec.startswith("sim:")


def parse_sim_spec(spec: str) -> SimOptions:
    """"sim" or "sim:key=value,..." -> SimOptions; a clear SimSpecError for anything else."""
    spec = spec.strip()
    if not is_sim_spec(spec):
        raise SimSpecError(f"not a sim spec: {spec!r}")
    _, _, text = spec.partition(":")
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not value:
            raise SimSpecError(f"--llm sim parameter {part!r} must look like key=value "
                               f"(known: {', '.join(KNOWN_KEYS)})")
        pairs.append((key, value))
    config = _world_config(dict(pairs).get("world"))  # the world first; the run settings apply on top
    base_url: str | None = None
    model = config.model
    for key, value in pairs:
        if key == "world":
            continue
        if key == "realtime":
            if value not in {"0", "1", "true", "false"}:
                raise SimSpecError(f"--llm sim: realtime must be 0 or 1, got {value!r}")
            if value in {"1", "true"}:
                config = replace(config, latency_scale=1.0)
        elif key in _FLOAT_KEYS:
            try:
                number = float(value)
            except ValueError:
                raise SimSpecError(f"--llm sim: {key} must be a number, got {value!r}") from None
            if number < 0 or number != number:
                raise SimSpecError(f"--llm sim: {key} must be >= 0, got {value!r}")
            config = replace(config, **{_FLOAT_KEYS[key]: number})
        elif key == "base_url":
            if not value.startswith(("http://", "https://")):
                raise SimSpecError(f"--llm sim: base_url must be an http(s) URL, got {value!r}")
            base_url = value
        elif key == "model":
            model = value
        else:
            raise SimSpecError(f"--llm sim: unknown parameter {key!r} (known: {', '.join(KNOWN_KEYS)})")
    if base_url is not None and config.latency_scale < 1.0:
        raise SimSpecError("--llm sim: base_url needs realtime=1 (the server sleeps the full simulated latency)")
    return SimOptions(config=config, base_url=base_url, model=model)


def _world_config(path: str | None) -> SimConfig:
    if path is None:
        return SimConfig()
    from rollout.sim.world_file import WorldFileError, load_world

    try:
        return SimConfig.from_world(load_world(path))
    except WorldFileError as exc:
        raise SimSpecError(f"--llm sim:world: {exc}") from None


def absolute_world_spec(spec: str) -> str:
    """The spec with a relative `world=FILE` made absolute (other specs unchanged)."""
    if not is_sim_spec(spec) or "world=" not in spec:
        return spec
    from pathlib import Path

    head, _, text = spec.strip().partition(":")
    parts = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if key.strip() == "world" and sep and value.strip():
            part = f"world={Path(value.strip()).expanduser().resolve()}"
        parts.append(part)
    return f"{head}:{','.join(parts)}"


def world_label(config: SimConfig) -> str:
    """How reports name a world: "default a6d60f90bf058600"."""
    return f"{config.world_name} {config.world_hash}"


def sim_config_for(spec: str) -> SimConfig:
    """The SimConfig of a sim spec ("sim", "sim:world=FILE,..."): for commands that run episodes in-process."""
    return parse_sim_spec(spec).config

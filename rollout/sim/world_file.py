"""The world file: every parameter of the simulated world and its prompted teachers, one YAML document.

`rollout/sim/default_world.yaml` is the default world; `SimConfig()` and the teacher profiles
take their values from it. `--llm sim:world=FILE` runs another one. A world file is validated
whole before anything runs, with an error that names the key (`world.repair_prob: must be a
probability in [0, 1], got 1.4`). A world's hash is the sha256 of its parameters as canonical
JSON (first 16 hex digits): the same parameters give the same hash whatever the comments or the
key order, and it is recorded with every run made in it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rollout.core.agent_table import NUM_AGENTS
from rollout.sim.faults import CATALOG, PDDL_FAULTS
from solvers.errors import InputError

DEFAULT_WORLD_PATH = Path(__file__).with_name("default_world.yaml")
WORLD_FILE_VERSION = 1

# Situation classes of the teachers' tables beside the fault kinds of the catalog (plan faults are "plan:<kind>").
EMPTY, VALID, STALE = "empty_domain", "valid_plan", "stale_plan"
SITUATIONS = (EMPTY, VALID, *(f"plan:{k}" if fc.target == "plan" else k for k, fc in CATALOG.items()), STALE)


# the profiles `teacher:model=sim,profile=NAME` names; a world file defines each of them
TEACHER_PROFILES = ("weaker", "stronger")


class WorldFileError(InputError, ValueError):
    """A world file that cannot be used; the message names the file and the key."""


def _number(key: str, value: Any, low: float = 0.0, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise WorldFileError(f"{key}: must be a number, got {value!r}")
    if not low <= value <= high:
        span = "a probability in [0, 1]" if (low, high) == (0.0, 1.0) else f"in [{low:g}, {high:g}]"
        raise WorldFileError(f"{key}: must be {span}, got {value!r}")
    return float(value)


def _prob(key: str, value: Any) -> float:
    return _number(key, value, 0.0, 1.0)


def _nonneg(key: str, value: Any) -> float:
    return _number(key, value)


def _positive(key: str, value: Any) -> float:
    out = _number(key, value)
    if out <= 0:
        raise WorldFileError(f"{key}: must be > 0, got {value!r}")
    return out


def _count(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WorldFileError(f"{key}: must be a whole number >= 0, got {value!r}")
    return value


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise WorldFileError(f"{key}: must be a non-empty string, got {value!r}")
    return value


def _weights(key: str, value: Any) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise WorldFileError(f"{key}: must be a non-empty list of weights, got {value!r}")
    out = tuple(_nonneg(f"{key}[{i}]", v) for i, v in enumerate(value))
    if sum(out) <= 0:
        raise WorldFileError(f"{key}: the weights must not all be 0")
    return out


def _mapping(key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WorldFileError(f"{key}: must be a mapping, got {type(value).__name__}")
    return value


def _known(key: str, data: dict[str, Any], allowed: tuple[str, ...] | set[str] | dict[str, Any],
           required: bool = True) -> None:
    unknown = sorted(set(map(str, data)) - set(allowed))
    prefix = f"{key}." if key else ""
    if unknown:
        raise WorldFileError(f"{prefix}{unknown[0]}: unknown key (known: {', '.join(sorted(allowed))})")
    missing = sorted(set(allowed) - set(map(str, data))) if required else []
    if missing:
        raise WorldFileError(f"{prefix}{missing[0]}: missing")


def _class_weights(key: str, value: Any) -> dict[str, float]:
    data = _mapping(key, value)
    _known(key, data, PDDL_FAULTS, required=False)
    out = {k: _nonneg(f"{key}.{k}", v) for k, v in data.items()}
    if not out or sum(out.values()) <= 0:
        raise WorldFileError(f"{key}: the weights must not all be 0")
    return out


def _prices(key: str, value: Any) -> dict[str, tuple[float, float]]:
    out = {}
    for model, pair in _mapping(key, value).items():
        if not isinstance(pair, list) or len(pair) != 2:
            raise WorldFileError(f"{key}.{model}: must be [input, output] USD per million tokens, got {pair!r}")
        out[str(model)] = (_nonneg(f"{key}.{model}[0]", pair[0]), _nonneg(f"{key}.{model}[1]", pair[1]))
    return out


WORLD_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "repair_prob": _prob, "secondary_repair_prob": _prob, "dynamic_repair_prob": _prob, "hint_bonus": _prob,
    "idle_fault_prob": _prob, "side_effect_prob": _prob, "generalist_rewrite_prob": _prob,
    "fault_count_weights": _weights, "emergency_fault_count_weights": _weights, "class_weights": _class_weights,
    "plan_fault_prob": _prob, "empty_start_prob": _prob, "no_draft_plan_prob": _prob, "rename_prob": _prob,
    "size_reference": _nonneg, "size_exponent": _positive, "size_extra_faults": _nonneg,
    "size_repair_decay": _nonneg, "latency_median_ms": _nonneg, "latency_sigma": _nonneg,
    "reasoning_tokens_median": _nonneg, "reasoning_tokens_sigma": _nonneg, "prompt_base_tokens": _count,
    "model": _text, "prices": _prices, "check_detect_prob": _prob, "check_false_alarm_prob": _prob,
}
TEACHER_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "model": _text, "quality": _prob, "unparsable": _prob, "latency_median_ms": _nonneg, "latency_sigma": _nonneg,
    "reasoning_tokens_median": _nonneg, "reasoning_tokens_sigma": _nonneg, "systematic": _prob,
}


def _situation_table(key: str, value: Any, check: Callable[[str, Any], Any]) -> dict[str, Any]:
    data = _mapping(key, value)
    _known(key, data, SITUATIONS, required=False)
    return {str(k): check(f"{key}.{k}", v) for k, v in data.items()}


def _agent(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < NUM_AGENTS:
        raise WorldFileError(f"{key}: must be an agent ID in 0..{NUM_AGENTS - 1}, got {value!r}")
    return value


def _teacher(key: str, value: Any, priced: set[str]) -> dict[str, Any]:
    data = _mapping(key, value)
    _known(key, data, {*TEACHER_KEYS, "accuracy", "confusion"})
    out = {k: check(f"{key}.{k}", data[k]) for k, check in TEACHER_KEYS.items()}
    if out["model"] not in priced:
        raise WorldFileError(f"{key}.model: {out['model']!r} has no entry in teacher_prices "
                             f"(have: {', '.join(sorted(priced))})")
    out["accuracy"] = _situation_table(f"{key}.accuracy", data["accuracy"], _prob)
    out["confusion"] = _situation_table(f"{key}.confusion", data["confusion"], _agent)
    return out


def _teacher_prices(key: str, value: Any) -> dict[str, dict[str, float]]:
    out = {}
    for model, entry in _mapping(key, value).items():
        entry = _mapping(f"{key}.{model}", entry)
        _known(f"{key}.{model}", entry, ("input", "output"))
        out[str(model)] = {k: _nonneg(f"{key}.{model}.{k}", entry[k]) for k in ("input", "output")}
    return out


def _published(key: str, value: Any) -> dict[str, Any]:
    data = _mapping(key, value)
    _known(key, data, ("label", "calls", "usd_per_task"))
    return {"label": _text(f"{key}.label", data["label"]), "calls": _positive(f"{key}.calls", data["calls"]),
            "usd_per_task": _positive(f"{key}.usd_per_task", data["usd_per_task"])}


CALIBRATION_TEACHER_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "model": _text, "prompt_tokens": _count, "reasoning_tokens": _count, "answer_tokens": _count,
    "usd_per_m_input": _nonneg, "usd_per_m_output": _nonneg, "published": _published,
}
CALIBRATION_SERVED_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "usd_per_gpu_hour": _nonneg, "decisions_per_gpu_hour": _positive, "published": _published,
}


def _checked(key: str, value: Any, keys: dict[str, Callable[[str, Any], Any]]) -> dict[str, Any]:
    data = _mapping(key, value)
    _known(key, data, keys)
    return {k: check(f"{key}.{k}", data[k]) for k, check in keys.items()}


def _rates(key: str, value: Any) -> dict[str, float]:
    return {str(k): _prob(f"{key}.{k}", v) for k, v in _mapping(key, value).items()}


def _paper_calibration(key: str, value: Any) -> dict[str, Any]:
    """The constants that put simulated costs on the HALO paper's scale (rollout/sim/paper_calibration.py)."""
    data = _mapping(key, value)
    _known(key, data, ("teachers", "served_policy", "vanilla_success", "vanilla_model"))
    named = _mapping(f"{key}.teachers", data["teachers"])
    _known(f"{key}.teachers", named, TEACHER_PROFILES)
    vanilla = _mapping(f"{key}.vanilla_success", data["vanilla_success"])
    _known(f"{key}.vanilla_success", vanilla, ("domain", "family"))
    out = {"teachers": {n: _checked(f"{key}.teachers.{n}", named[n], CALIBRATION_TEACHER_KEYS)
                        for n in TEACHER_PROFILES},
           "served_policy": _checked(f"{key}.served_policy", data["served_policy"], CALIBRATION_SERVED_KEYS),
           "vanilla_success": {k: _rates(f"{key}.vanilla_success.{k}", vanilla[k]) for k in ("domain", "family")},
           "vanilla_model": _text(f"{key}.vanilla_model", data["vanilla_model"])}
    if "generated" not in out["vanilla_success"]["family"]:
        raise WorldFileError(f"{key}.vanilla_success.family.generated: missing (the rate of any other family)")
    if out["vanilla_model"] not in TEACHER_PROFILES:
        raise WorldFileError(f"{key}.vanilla_model: must be one of {', '.join(TEACHER_PROFILES)}, "
                             f"got {out['vanilla_model']!r}")
    return out


@dataclass(frozen=True)
class World:
    """A validated world: the world's parameters, the teachers', their prices, and where it came from."""

    name: str
    sim: dict[str, Any]  # SimConfig's world fields
    teachers: dict[str, dict[str, Any]]
    teacher_prices: dict[str, dict[str, float]]
    paper_calibration: dict[str, Any]  # the paper-scale accounting constants (rollout/sim/paper_calibration.py)
    source: str = ""

    @property
    def hash(self) -> str:
        return world_hash(self.sim, self.teachers, self.teacher_prices, self.paper_calibration)


def world_hash(sim: dict[str, Any], teachers: dict[str, Any], teacher_prices: dict[str, Any],
               paper_calibration: dict[str, Any]) -> str:
    """sha256 of the parameters as canonical JSON (tuples as lists, keys sorted), first 16 hex digits."""
    doc = {"version": WORLD_FILE_VERSION, "world": sim, "teachers": teachers, "teacher_prices": teacher_prices,
           "paper_calibration": paper_calibration}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def parse_world(data: Any, source: str = "<world>") -> World:
    """A parsed YAML document -> World, or a WorldFileError naming the source and the key."""
    try:
        doc = _mapping("the document", data)
        _known("", doc, ("version", "name", "world", "teachers", "teacher_prices", "paper_calibration"))
        if doc["version"] != WORLD_FILE_VERSION:
            raise WorldFileError(f"version: {doc['version']!r} (this release reads version {WORLD_FILE_VERSION})")
        name = _text("name", doc["name"])
        world = _mapping("world", doc["world"])
        _known("world", world, WORLD_KEYS)
        sim = {k: check(f"world.{k}", world[k]) for k, check in WORLD_KEYS.items()}
        if sim["model"] not in sim["prices"]:
            raise WorldFileError(f"world.model: {sim['model']!r} has no entry in world.prices")
        prices = _teacher_prices("teacher_prices", doc["teacher_prices"])
        named = _mapping("teachers", doc["teachers"])
        _known("teachers", named, TEACHER_PROFILES)
        teachers = {n: _teacher(f"teachers.{n}", named[n], set(prices)) for n in TEACHER_PROFILES}
        paper = _paper_calibration("paper_calibration", doc["paper_calibration"])
    except WorldFileError as exc:
        raise WorldFileError(f"{source}: {exc}") from None
    return World(name, sim, teachers, prices, paper, source)


def load_world(path: str | Path) -> World:
    """Read and validate a world file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise WorldFileError(f"{path}: no such world file")
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise WorldFileError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return parse_world(data, str(path))


@lru_cache(maxsize=1)
def _default() -> World:
    return load_world(DEFAULT_WORLD_PATH)


def default_world() -> World:
    """The default world (a deep copy: callers may not change the shared one)."""
    return copy.deepcopy(_default())


def default_world_text() -> str:
    return DEFAULT_WORLD_PATH.read_text()


__all__ = ["DEFAULT_WORLD_PATH", "SITUATIONS", "World", "WorldFileError", "default_world", "default_world_text",
           "load_world", "parse_world", "world_hash"]

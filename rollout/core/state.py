"""Episode state: what a policy sees at one step of the refinement loop.

The same fields form the JSON body of the HTTP decision API and the `state_json` column of the
trajectory store, so `EpisodeState.from_dict(state.to_dict())` must round-trip exactly.

A state is validated in one place: `state_schema()`, a strict pydantic model generated from the
dataclass (no "1" for 1, no 0 for false, bounded step and agent IDs). `from_dict` runs it (and
ignores keys it does not know, so older or newer records still load); the HTTP API uses the same
model as its request body (refusing unknown keys there) and builds the state with `from_model`
without checking it again.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any

from rollout.core.agent_table import AgentId
from solvers.errors import InputError

if TYPE_CHECKING:
    from pydantic import BaseModel

HISTORY_LEN = 10
MAX_STEP = 100_000  # far past any refinement loop; bounds what the store and the encoders see
MAX_HISTORY_IN = 1000  # longest history accepted (it is cut to the last HISTORY_LEN)

# Required in every serialised state; everything else has a default.
REQUIRED_FIELDS = ("task_description",)


class StateError(InputError, ValueError):
    """A state dict that cannot be turned into an EpisodeState; names the bad field."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field_name = field_name


@dataclass
class EpisodeState:
    task_description: str
    spec_json: str | None = None
    domain: str = ""
    problem: str = ""
    plan: str = ""
    validator_errors: str = ""
    planner_log: str = ""
    # The last error category seen (solvers.ErrorCategory value), "" before any solver call.
    error_category: str = ""
    plan_found: bool = False
    plan_valid: bool = False
    history: list[int] = field(default_factory=list)
    proposed_solution: str = ""
    step: int = 0
    target_planner: str = "fd"

    def with_history(self, agent_id: int) -> list[int]:
        return (self.history + [int(agent_id)])[-HISTORY_LEN:]  # plain ints, an AgentId too

    def to_dict(self) -> dict[str, Any]:
        # Fields are strings, numbers, booleans and one list of ints: a shallow copy is a full
        # one (asdict's recursive deep copy was a visible share of each episode step).
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), list) else v for f in _FIELDS}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeState:
        """Validate `data` with `state_schema()`; raises StateError naming the first bad field."""
        from pydantic import ValidationError

        if not isinstance(data, dict):
            raise StateError("state", "must be a JSON object")
        try:
            model = state_schema().model_validate({k: v for k, v in data.items() if k in _NAMES})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise StateError(field_path(first["loc"]) or "state", first["msg"]) from None
        return cls.from_model(model)

    @classmethod
    def from_json(cls, text: str) -> EpisodeState:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_model(cls, model: BaseModel) -> EpisodeState:
        """The state of an already validated `state_schema()` instance (no second check)."""
        values = {name: getattr(model, name) for name in _NAMES}
        values["history"] = values["history"][-HISTORY_LEN:]
        return cls(**values)


def field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """A pydantic error location as one path: ("history", 0) -> "history[0]", ("a", "b") -> "a.b"."""
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


_FIELDS = fields(EpisodeState)
_NAMES = frozenset(f.name for f in _FIELDS)
_TYPES: dict[str, Any] = {"str": str, "str | None": str | None, "bool": bool}


@cache
def state_schema() -> type[BaseModel]:
    """The one validation of a serialised EpisodeState, built from the dataclass so the two cannot
    drift apart. Strict and closed (unknown keys refused); pydantic loads on first use only."""
    from pydantic import ConfigDict, Field, create_model

    agent_id = Annotated[int, Field(ge=0, le=int(AgentId.DYNAMIC))]
    bounded: dict[str, Any] = {"step": Annotated[int, Field(ge=0, le=MAX_STEP)],
                               "history": Annotated[list[agent_id], Field(max_length=MAX_HISTORY_IN)]}
    spec: dict[str, Any] = {}
    for f in _FIELDS:
        annotation = bounded.get(f.name) or _TYPES[str(f.type)]
        if f.default is not MISSING:
            spec[f.name] = (annotation, f.default)
        elif f.default_factory is not MISSING:
            spec[f.name] = (annotation, Field(default_factory=f.default_factory))
        else:
            spec[f.name] = (annotation, ...)
    model = create_model("StateIn", __config__=ConfigDict(strict=True, extra="forbid"), **spec)
    model.__doc__ = "An episode state (rollout/core/state.py): what the orchestrator sees at one refinement step."
    return model

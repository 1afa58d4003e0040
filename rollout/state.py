"""Episode state: what a policy sees at one step of the refinement loop.

The same fields form the JSON body of the HTTP decision API and the `state_json` column of the
trajectory store, so `EpisodeState.from_dict(state.to_dict())` must round-trip exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

HISTORY_LEN = 10

# Required in every serialised state; everything else has a default.
REQUIRED_FIELDS = ("task_description",)


class StateError(ValueError):
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
        return (self.history + [agent_id])[-HISTORY_LEN:]

    def to_dict(self) -> dict[str, Any]:
        # Fields are strings, numbers, booleans and one list of ints: a shallow copy is a full
        # one (asdict's recursive deep copy was a visible share of each episode step).
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), list) else v for f in _FIELDS}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeState:
        if not isinstance(data, dict):
            raise StateError("state", "must be a JSON object")
        for name in REQUIRED_FIELDS:
            if name not in data:
                raise StateError(name, "field required")
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                continue
            kwargs[key] = _check_type(key, value, known[key].type)
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> EpisodeState:
        return cls.from_dict(json.loads(text))


def _check_type(key: str, value: Any, annotation: Any) -> Any:
    ann = str(annotation)
    if ann == "list[int]":
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise StateError(key, "must be a list of integers")
        return value[-HISTORY_LEN:]
    if ann == "bool":
        if not isinstance(value, bool):
            raise StateError(key, "must be a boolean")
        return value
    if ann == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise StateError(key, "must be an integer")
        return value
    if ann == "str | None":
        if value is not None and not isinstance(value, str):
            raise StateError(key, "must be a string or null")
        return value
    if not isinstance(value, str):
        raise StateError(key, "must be a string")
    return value


_FIELDS = fields(EpisodeState)

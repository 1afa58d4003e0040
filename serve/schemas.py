"""The HTTP API's request and response bodies (they make the OpenAPI document).

`StateIn` is generated from `rollout.state.EpisodeState` so the two cannot drift apart; it is
strict (no "1" for 1, no 0 for false) like `EpisodeState.from_dict`.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from rollout.state import EpisodeState

_STRICT = ConfigDict(strict=True, extra="ignore")
_TYPES: dict[str, Any] = {"str": str, "str | None": str | None, "bool": bool, "int": int, "list[int]": list[int]}


def _state_model() -> type[BaseModel]:
    spec: dict[str, Any] = {}
    for f in fields(EpisodeState):
        annotation = _TYPES[str(f.type)]
        if f.default is not MISSING:
            spec[f.name] = (annotation, f.default)
        elif f.default_factory is not MISSING:
            spec[f.name] = (annotation, Field(default_factory=f.default_factory))
        else:
            spec[f.name] = (annotation, ...)
    model = create_model("StateIn", __config__=_STRICT, **spec)
    model.__doc__ = "An episode state (rollout/state.py): what the orchestrator sees at one refinement step."
    return model


StateIn = _state_model()


class DecisionOut(BaseModel):
    agent_id: int = Field(description="the chosen agent (0..20; 21 is the dynamic agent)")
    agent_name: str
    decided_by: str = Field(description="rule (rules layer, no model) or model")
    policy_version: str = Field(description="version of the model on the replica that answered")
    latency_ms: float = Field(description="time spent deciding inside the service")
    reason: str = ""


class BatchIn(BaseModel):
    model_config = _STRICT
    states: list[StateIn] = Field(min_length=1)  # type: ignore[valid-type]


class BatchOut(BaseModel):
    decisions: list[DecisionOut]
    policy_version: str


class FeedbackStep(BaseModel):
    model_config = _STRICT
    step: int = Field(ge=0)
    state: StateIn  # type: ignore[valid-type]
    agent_id: int = Field(ge=0, le=21)
    decided_by: str = "model"
    decision_reason: str = ""
    decision_latency_ms: float = 0.0
    domain_after: str = ""
    problem_after: str = ""
    plan_after: str = ""
    plan_found: bool = False
    plan_valid: bool = False
    error_category: str = ""
    agent_ok: bool = True
    agent_message: str = ""
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0


class FeedbackIn(BaseModel):
    model_config = _STRICT
    episode_id: str = Field(min_length=1, max_length=200)
    llm_backend: str = Field(min_length=1, description='"sim" for the simulated agent world, else the real backend')
    success_validator: bool
    success_oracle: bool | None = None
    steps: list[FeedbackStep] = Field(min_length=1)
    task_id: str = ""
    family: str = ""
    domain_name: str = ""
    policy_name: str = "served-student"
    policy_version: str = ""
    final_plan: str = ""
    natural_language_plan: str = ""
    seed: int = 0
    wall_s: float = 0.0


class FeedbackOut(BaseModel):
    episode_id: str
    stored: bool = Field(description="false when this episode_id was already stored (idempotent)")
    steps: int


class ModelIn(BaseModel):
    model_config = _STRICT
    model: str = Field(min_length=1, description="model directory or store URL holding manifest.json")


class ModelOut(BaseModel):
    target: dict[str, Any] | None
    replicas: dict[str, Any] = {}
    history: list[dict[str, Any]] = []


class ErrorOut(BaseModel):
    error: str
    detail: Any = None
    field: str | None = None

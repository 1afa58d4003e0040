"""The HTTP API's request and response bodies (they make the OpenAPI document).

`StateIn` is `rollout.core.state.state_schema()`, the one validation of an episode state, which
`EpisodeState.from_dict` runs too; `DecisionOut` carries every field of `rollout.core.decision.Decision`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from rollout.core.agent_table import NUM_AGENTS, AgentId
from rollout.core.decision import DecidedBy
from rollout.core.state import MAX_STEP, state_schema
from rollout.core.trajectory import FEEDBACK_STEP_FIELDS, StepRecord

# Strict: no coercion ("1" is not 1) and unknown fields refused, so a typo such as `plan_vaild`
# is a 422 naming it rather than a silently different decision.
_STRICT = ConfigDict(strict=True, extra="forbid")
INT64_MAX = 2**63 - 1
# What the trajectory store's int64/float64 columns hold; floats also finite (no NaN/Infinity).
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
Seconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
_TYPES: dict[str, Any] = {"str": str, "bool": bool, "int": Count, "float": Seconds}

StateIn = state_schema()


class DecisionOut(BaseModel):
    """`rollout.core.decision.Decision.to_dict()`: every field of a decision, and the agent's name."""

    agent_id: int = Field(description=f"the chosen agent (0..{NUM_AGENTS - 1}; {AgentId.DYNAMIC} is the dynamic "
                                      "agent)")
    agent_name: str
    decided_by: str = Field(description="rule (rules layer, no model) or model")
    policy_version: str = Field(description="version of the model on the replica that answered")
    latency_ms: float = Field(description="time spent deciding inside the service")
    reason: str = ""
    dynamic_profile: str | None = Field(None, description=f"the task profile when agent_id is {AgentId.DYNAMIC}")
    llm_calls: int = Field(0, description="LLM calls the decision itself made (0 for a trained policy)")
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


class BatchIn(BaseModel):
    model_config = _STRICT
    states: list[StateIn] = Field(min_length=1)  # type: ignore[valid-type]


class BatchOut(BaseModel):
    decisions: list[DecisionOut]
    policy_version: str


def _feedback_step_model() -> type[BaseModel]:
    """One step of /v1/feedback: StepRecord's fields (rollout/core/trajectory.py), minus the ones the
    service derives, with the state as an object."""
    record_fields = {f.name: f for f in fields(StepRecord)}
    spec: dict[str, Any] = {
        "step": (int, Field(ge=0, le=MAX_STEP)),
        "state": (StateIn, ...),
        "agent_id": (int, Field(ge=0, le=int(AgentId.DYNAMIC))),
        "decided_by": (Literal[get_args(DecidedBy)], "model"),  # type: ignore[valid-type]
    }
    for name in FEEDBACK_STEP_FIELDS:
        if name not in spec:
            f = record_fields[name]
            spec[name] = (_TYPES[str(f.type)], f.default)
    return create_model("FeedbackStep", __config__=_STRICT, **spec)


FeedbackStep = _feedback_step_model()


class FeedbackIn(BaseModel):
    model_config = _STRICT
    episode_id: str = Field(min_length=1, max_length=200)
    llm_backend: str = Field(min_length=1, description='"sim" for the simulated agent world, else the real backend')
    success_validator: bool
    success_oracle: bool | None = None
    steps: list[FeedbackStep] = Field(min_length=1, max_length=MAX_STEP)  # type: ignore[valid-type]
    task_id: str = ""
    family: str = ""
    domain_name: str = ""
    policy_name: str = "served-student"
    policy_version: str = ""
    final_plan: str = ""
    natural_language_plan: str = ""
    seed: int = Field(0, ge=-INT64_MAX - 1, le=INT64_MAX)
    wall_s: Seconds = 0.0

    @field_validator("steps")
    @classmethod
    def _distinct_steps(cls, steps: list[Any]) -> list[Any]:
        seen: set[int] = set()
        for s in steps:
            if s.step in seen:
                raise ValueError(f"step number {s.step} appears twice")
            seen.add(s.step)
        return steps


class FeedbackOut(BaseModel):
    episode_id: str
    stored: bool = Field(description="false when this episode_id was already stored (idempotent)")
    steps: int
    stored_id: str = Field("", description="the episode's ID in the store: KEY_NAME:episode_id")
    verdict: str = Field("", description="serve-feedback:verified (every claim matches the service's own checks) "
                                         "or serve-feedback:disagrees (stored, never trusted); empty for a repeat")


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

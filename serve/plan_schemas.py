"""Bodies of /v1/plans: a planning request with its budget, and a job as the API shows it.

Strict like the decision routes' schemas (no coercion, unknown fields refused). Every text has a
ceiling well under the body limit, so a huge description or PDDL text is a 422 naming the field
before any job exists; what passes still runs in the sandbox under the job's budget.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_STRICT = ConfigDict(strict=True, extra="forbid")
MAX_DESCRIPTION_CHARS = 20_000
MAX_PDDL_CHARS = 100_000
MAX_SPEC_CHARS = 50_000
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


class PlanBudget(BaseModel):
    """What one job may spend; the first limit reached ends it as `failed` with the reason."""

    model_config = _STRICT
    max_steps: int = Field(10, ge=1, le=50, description="refinement steps (agent applications)")
    max_llm_calls: int = Field(40, ge=0, le=10_000, description="LLM calls by the agents and the orchestrator")
    max_usd: float = Field(1.0, ge=0.0, le=1_000.0, allow_inf_nan=False, description="LLM spend in USD")
    max_seconds: float = Field(300.0, gt=0.0, le=3_600.0, allow_inf_nan=False,
                               description="wall-clock seconds the job may run (summed over restarts)")


class PlanIn(BaseModel):
    model_config = _STRICT
    task_description: str = Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS)
    domain: str = Field("", max_length=MAX_PDDL_CHARS, description="a PDDL domain to start from (optional)")
    problem: str = Field("", max_length=MAX_PDDL_CHARS, description="a PDDL problem to start from (optional)")
    spec_json: str | None = Field(None, max_length=MAX_SPEC_CHARS)
    target_planner: Literal["fd", "temporal"] = "fd"
    task_id: str | None = Field(None, min_length=1, max_length=200,
                                description="a known task (required by the simulated agents: they need its gold PDDL)")
    seed: int = Field(0, ge=0, le=2**31 - 1)
    budget: PlanBudget = Field(default_factory=PlanBudget)


class PlanCreated(BaseModel):
    id: str
    status: JobStatus


class PlanStep(BaseModel):
    step: int
    agent_id: int
    agent_name: str
    decided_by: str
    agent_ok: bool
    agent_message: str = ""
    plan_found: bool | None = None
    plan_valid: bool | None = None
    error_category: str = ""
    llm_calls: int = 0
    cost_usd: float = 0.0


class PlanOut(BaseModel):
    id: str
    status: JobStatus
    plan: str = Field("", description="the final PDDL plan (empty unless the validator accepted one)")
    natural_language_plan: str = ""
    validated: bool = Field(False, description="the validator accepted `plan` against `domain` and `problem`")
    oracle: bool | None = Field(None, description="checked against the task's gold answer (known task_id only)")
    domain: str = ""
    problem: str = ""
    steps: list[PlanStep] = []
    llm_calls: int = 0
    cost_usd: float = 0.0
    error: str = Field("", description="why the job failed or was cancelled")
    created_at: float = 0.0
    updated_at: float = 0.0
    resumed: int = Field(0, description="how many times the job was resumed after a service restart")


def public_view(job: dict[str, Any]) -> dict[str, Any]:
    """The API's view of a stored job (serve/plan_jobs.py): the fields PlanOut declares."""
    return {name: job[name] for name in PlanOut.model_fields if name in job}

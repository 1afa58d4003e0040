"""The trajectory schema: one row per refinement step, episode fields repeated on each row.

This is the single record format shared by rollouts, the store, dataset building, serving
feedback and the online loop. Bump SCHEMA_VERSION on any change and keep readers tolerant of
older versions (missing columns read as null).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import pyarrow as pa

SCHEMA_VERSION = 2  # 2: parent_step, branch, on_path (search trees)


@dataclass
class StepRecord:
    step: int
    state_json: str  # EpisodeState.to_json() exactly as the policy saw it
    agent_id: int
    agent_name: str
    decided_by: str
    is_hardcoded: bool
    decision_reason: str = ""
    decision_latency_ms: float = 0.0
    # What the step produced (enough to recompute the validator verdict later).
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
    # A search episode (rollout/policies/search.py) keeps the tree it explored: the step this one
    # followed (-1: the root; a plain episode's steps follow one another and keep -1), the child
    # rank it was among its parent's, and whether it is on the chosen path (every plain step is).
    parent_step: int = -1
    branch: int = 0
    on_path: bool = True


# The step fields a client sends to /v1/feedback: the service receives the state as an object (not
# JSON text) and derives agent_name and is_hardcoded from agent_id and decided_by.
FEEDBACK_DERIVED_STEP_FIELDS = ("state_json", "agent_name", "is_hardcoded")
# A search tree's fields are not part of feedback: a served episode is one path.
SEARCH_TREE_STEP_FIELDS = ("parent_step", "branch", "on_path")
FEEDBACK_STEP_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(StepRecord) if f.name not in FEEDBACK_DERIVED_STEP_FIELDS + SEARCH_TREE_STEP_FIELDS
)


@dataclass
class EpisodeRecord:
    episode_id: str
    run_id: str
    task_id: str
    family: str  # benchmark family: planbench | natural_plan | classical | temporal | ...
    domain_name: str
    policy_name: str
    policy_version: str
    llm_backend: str  # "sim" for the simulated agent world; never mixed with real-LLM results
    success_validator: bool
    success_oracle: bool | None  # None when no gold answer exists
    steps: list[StepRecord] = field(default_factory=list)
    model_version: str = ""
    seed: int = 0
    code_version: str = ""
    solver_versions: str = "{}"  # JSON object name -> version
    final_plan: str = ""
    natural_language_plan: str = ""
    total_llm_calls: int = 0
    total_tokens_in: int = 0
    total_tokens_out: int = 0
    total_cost_usd: float = 0.0
    wall_s: float = 0.0
    solver_cpu_s: float = 0.0
    created_at: float = 0.0
    error: str = ""  # non-empty when the episode ended on an exception (a bug, a broken policy)
    # Non-empty when a dependency failed (rollout/core/infra.py): the episode is not an outcome. Never
    # stored: the rollout job does not commit such an episode, the next resume runs it again.
    infra_error: str = ""

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def to_rows(self) -> list[dict[str, Any]]:
        episode = {k: v for k, v in asdict(self).items() if k != "steps" and k not in NOT_STORED}
        episode["num_steps"] = self.num_steps
        episode["schema_version"] = SCHEMA_VERSION
        return [{**episode, **asdict(step)} for step in self.steps]

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> EpisodeRecord:
        if not rows:
            raise ValueError("an episode needs at least one row")
        rows = sorted(rows, key=lambda r: r["step"])
        step_names = {f.name for f in fields(StepRecord)}
        episode_names = {f.name for f in fields(cls)} - {"steps"}
        first = rows[0]
        steps = [StepRecord(**{k: r[k] for k in step_names if k in r and r[k] is not None}) for r in rows]
        return cls(**{k: first[k] for k in episode_names if k in first}, steps=steps)


def is_infra_failure(record: EpisodeRecord) -> bool:
    """True when the episode ended on an infrastructure failure (LLM endpoint, student service,
    store, a solver that cannot start): not an outcome of the policy, so never scored, trained on
    or rewarded."""
    return bool(getattr(record, "infra_error", ""))


def outcome_pairs(a: list[EpisodeRecord], b: list[EpisodeRecord]) -> list[tuple[EpisodeRecord, EpisodeRecord]]:
    """Paired episodes (same task and seed, in the same order) where both ended on an outcome of
    their policy: a pair where either failed on infrastructure or broke is left out whole."""
    return [(x, y) for x, y in zip(a, b, strict=True)
            if not (is_infra_failure(x) or is_infra_failure(y) or x.error or y.error)]


# EpisodeRecord fields that are not columns of the store (see their comments).
NOT_STORED = frozenset({"infra_error"})

_PA_TYPES: dict[str, pa.DataType] = {
    "int": pa.int64(),
    "str": pa.string(),
    "bool": pa.bool_(),
    "float": pa.float64(),
    "bool | None": pa.bool_(),
}


def _arrow_fields() -> list[pa.Field]:
    out: list[pa.Field] = []
    seen: set[str] = set()
    for cls in (EpisodeRecord, StepRecord):
        for f in fields(cls):
            if f.name == "steps" or f.name in seen or f.name in NOT_STORED:
                continue
            seen.add(f.name)
            out.append(pa.field(f.name, _PA_TYPES[str(f.type)], nullable=True))
    out.append(pa.field("num_steps", pa.int64()))
    out.append(pa.field("schema_version", pa.int64()))
    return out


STEP_SCHEMA = pa.schema(_arrow_fields())


def episodes_to_table(episodes: list[EpisodeRecord]) -> pa.Table:
    rows = [row for ep in episodes for row in ep.to_rows()]
    return pa.Table.from_pylist(rows, schema=STEP_SCHEMA)


def table_to_episodes(table: pa.Table) -> list[EpisodeRecord]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        grouped.setdefault(row["episode_id"], []).append(row)
    return [EpisodeRecord.from_rows(rows) for rows in grouped.values()]

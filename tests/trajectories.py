"""EpisodeRecords built by hand for store tests (varied sizes, optional oracle, realistic text)."""

from __future__ import annotations

import random

from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord

_DOMAIN = "(define (domain blocksworld) (:requirements :strips) (:predicates (on ?x ?y) (clear ?x)))"


def make_episode(run_id: str, index: int, *, steps: int | None = None, seed: int = 0,
                 llm_backend: str = "sim") -> EpisodeRecord:
    rng = random.Random(f"{run_id}/{index}/{seed}")
    n_steps = steps if steps is not None else rng.randint(1, 6)
    ok = rng.random() < 0.7
    records = []
    for s in range(n_steps):
        state = EpisodeState(task_description=f"Stack {index % 7 + 2} blocks into one tower, task {index}.",
                             domain=_DOMAIN if s else "", step=s, history=[9, 2][: s % 3])
        last = s == n_steps - 1
        records.append(StepRecord(
            step=s, state_json=state.to_json(), agent_id=2 if s == 0 else 11 if last and ok else 9,
            agent_name="AgentEmergency" if s == 0 else "NoOpAgent" if last and ok else "AgentSyntaxPDDL",
            decided_by="rule" if s == 0 else "scripted", is_hardcoded=s == 0,
            domain_after=_DOMAIN, problem_after=f"(define (problem p{index}) (:domain blocksworld))",
            plan_after="(pick-up a)\n(stack a b)\n" if last and ok else "",
            plan_found=last and ok, plan_valid=last and ok,
            error_category="" if last and ok else "parse_error_domain",
            llm_calls=0 if s == 0 else 1, tokens_in=120 * s, tokens_out=40 * s,
            latency_ms=rng.uniform(5, 50), cost_usd=0.0001 * s,
        ))
    return EpisodeRecord(
        episode_id=f"{run_id}-ep{index:05d}-s{seed}", run_id=run_id,
        task_id=f"planbench/blocksworld/instance-{index % 13}",
        family="planbench", domain_name="blocksworld", policy_name="scripted", policy_version="1",
        llm_backend=llm_backend, success_validator=ok, success_oracle=(ok if index % 4 else None),
        steps=records, seed=seed, total_llm_calls=sum(r.llm_calls for r in records),
        total_cost_usd=sum(r.cost_usd for r in records), final_plan=records[-1].plan_after if records else "",
        wall_s=rng.uniform(0.1, 2.0), solver_cpu_s=rng.uniform(0.05, 1.0), created_at=1.8e9 + index,
    )


def make_episodes(run_id: str, n: int, *, start: int = 0, **kwargs) -> list[EpisodeRecord]:
    return [make_episode(run_id, i, **kwargs) for i in range(start, start + n)]

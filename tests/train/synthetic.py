"""Synthetic trajectories for unit tests that do not need the simulated world: a hidden
symptom -> agent rule, a teacher that follows it with probability 1 - noise."""

from __future__ import annotations

import random

from rollout.core.agent_table import agent_name
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord

# error category / diagnostic code -> the agent that fixes it
SYMPTOMS: tuple[tuple[str, str, int], ...] = (
    ("plan_invalid", "[validate.precondition_failed] precondition (clear b) of step 2 not satisfied", 13),
    ("plan_invalid", "[validate.goal_not_reached] goal (on a b) not reached after the last step", 17),
    ("no_plan_found", "search exhausted: no plan found", 20),
    ("unsupported_requirement", "[translate.unsupported] :durative-actions are not supported", 7),
    ("plan_invalid", "[validate.unused_step] step 4 has no effect on the goal", 15),
)

DOMAIN = "(define (domain blocks) (:requirements :strips) (:predicates (on ?x ?y) (clear ?x)) (:action stack))"


def synthetic_episodes(n_tasks: int = 20, per_task: int = 3, noise: float = 0.2, seed: int = 0,
                       accepted_fraction: float = 0.8, run_id: str = "run-syn") -> list[EpisodeRecord]:
    rng = random.Random(seed)
    episodes = []
    for t in range(n_tasks):
        for k in range(per_task):
            steps = []
            history: list[int] = []
            n_steps = rng.randint(1, 3)
            for s in range(n_steps):
                cat, err, good = SYMPTOMS[rng.randrange(len(SYMPTOMS))]
                state = EpisodeState(task_description=f"Stack the blocks of task {t} into one tower.",
                                     domain=DOMAIN, problem=f"(define (problem p{t}) (:domain blocks))",
                                     plan="(stack a b)\n(stack b c)\n", validator_errors=err,
                                     error_category=cat, plan_found=cat == "plan_invalid",
                                     history=list(history), step=s)
                agent = good if rng.random() > noise else rng.choice([0, 1, 3, 4, 5, 8])
                steps.append(StepRecord(step=s, state_json=state.to_json(), agent_id=agent,
                                        agent_name=agent_name(agent), decided_by="teacher", is_hardcoded=False,
                                        llm_calls=1))
                history.append(agent)
            final = EpisodeState(task_description="x", domain=DOMAIN, plan_valid=True, step=n_steps)
            steps.append(StepRecord(step=n_steps, state_json=final.to_json(), agent_id=11,
                                    agent_name=agent_name(11), decided_by="rule", is_hardcoded=True))
            accepted = rng.random() < accepted_fraction
            episodes.append(EpisodeRecord(
                episode_id=f"ep-{seed}-{t}-{k}", run_id=run_id, task_id=f"syn/blocks/task-{t}",
                family="classical", domain_name="blocks", policy_name="scripted", policy_version="1",
                llm_backend="sim", success_validator=accepted, success_oracle=accepted and rng.random() < 0.9,
                steps=steps))
    return episodes

"""EpisodeRecords built by hand for the value model's tests: episodes whose states carry a noisy
sign of how they end (successful episodes pass through validator-checked plans, failed ones stall
in planner failures), each outcome sometimes showing the other's symptoms."""

from __future__ import annotations

import random

from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord

_DOMAIN = "(define (domain blocks) (:requirements :strips) (:predicates (on ?x ?y) (clear ?x)) (:action stack))"
# error category, validator or planner text, plan found
_GOING_WELL = (("plan_invalid", "[validate.precondition_failed] precondition (clear b) of step 2 not satisfied", True),
               ("plan_invalid", "[validate.goal_not_reached] goal (on a b) not reached after the last step", True),
               ("ok", "", True))
_STALLING = (("no_plan_found", "search exhausted: no plan found", False),
             ("unsolvable_proved", "goal unreachable in the delete relaxation", False),
             ("parse_error_problem", "problem.pddl:3: undefined object c", False))


def value_episodes(n_tasks: int = 40, per_task: int = 3, noise: float = 0.2, seed: int = 0,
                   run_id: str = "value-syn", success_rate: float = 0.5) -> list[EpisodeRecord]:
    """`n_tasks` x `per_task` episodes, about `success_rate` of them oracle successes; a step shows
    the symptoms of the other outcome with probability `noise`."""
    rng = random.Random(seed)
    episodes = []
    for t in range(n_tasks):
        for k in range(per_task):
            success = rng.random() < success_rate
            steps, history = [], []
            for s in range(rng.randint(2, 5)):
                pool = _GOING_WELL if success != (rng.random() < noise) else _STALLING
                category, text, found = pool[rng.randrange(len(pool))]
                state = EpisodeState(task_description=f"Stack the blocks of task {t} into one tower.",
                                     domain=_DOMAIN if s else "", problem=f"(define (problem p{t}) (:domain blocks))",
                                     plan="(stack a b)\n" if found else "", validator_errors=text,
                                     error_category=category if s else "", plan_found=found and s > 0,
                                     history=list(history), step=s)
                agent = rng.choice([1, 3, 13, 17, 20])
                steps.append(StepRecord(step=s, state_json=state.to_json(), agent_id=agent, agent_name=f"a{agent}",
                                        decided_by="scripted", is_hardcoded=False, llm_calls=1))
                history.append(agent)
            episodes.append(EpisodeRecord(
                episode_id=f"{run_id}-{seed}-{t}-{k}", run_id=run_id, task_id=f"syn/blocks/task-{t}",
                family="classical", domain_name="blocks", policy_name="scripted", policy_version="1",
                llm_backend="sim", success_validator=success, success_oracle=success, steps=steps,
                total_llm_calls=len(steps)))
    return episodes

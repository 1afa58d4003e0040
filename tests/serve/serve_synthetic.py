"""Synthetic accepted trajectories with a hidden symptom -> agent map, to train real fast policies
for the serving tests (two maps give two model versions that answer differently)."""

from __future__ import annotations

import random

from rollout.core.agent_table import agent_name
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord

# (error category, validator diagnostic) observed in a state that the rules layer does not decide
SYMPTOMS: tuple[tuple[str, str], ...] = (
    ("plan_invalid", "[validate.precondition_failed] precondition (clear b) of step 2 not satisfied"),
    ("plan_invalid", "[validate.goal_not_reached] goal (on a b) not reached after the last step"),
    ("no_plan_found", "search exhausted: no plan found"),
    ("unsupported_requirement", "[translate.unsupported] :durative-actions are not supported"),
)
MAP_V1 = (13, 17, 20, 7)
MAP_V2 = (14, 16, 8, 7)

DOMAIN = "(define (domain blocks) (:requirements :strips) (:predicates (on ?x ?y) (clear ?x)) (:action stack))"


def symptom_state(symptom: int, task: int = 0, step: int = 1) -> EpisodeState:
    category, diagnostic = SYMPTOMS[symptom]
    return EpisodeState(task_description=f"Stack the blocks of task {task} into one tower.", domain=DOMAIN,
                        problem=f"(define (problem p{task}) (:domain blocks))", plan="(stack a b)\n(stack b c)\n",
                        validator_errors=diagnostic, error_category=category,
                        plan_found=category == "plan_invalid", step=step)


def rule_state(kind: str) -> EpisodeState:
    if kind == "empty":
        return EpisodeState(task_description="Stack the blocks.")
    if kind == "valid":
        return EpisodeState(task_description="Stack the blocks.", domain=DOMAIN, plan="(stack a b)\n",
                            plan_found=True, plan_valid=True)
    return EpisodeState(task_description="Stack the blocks.", domain=DOMAIN, error_category="parse_error_domain",
                        validator_errors="[parse.unexpected_end] domain ends early")


def episodes(agent_map: tuple[int, ...], n_tasks: int = 24, seed: int = 0, run_id: str = "run-serve") \
        -> list[EpisodeRecord]:
    rng = random.Random(seed)
    out = []
    for t in range(n_tasks):
        steps = []
        for s in range(3):
            symptom = rng.randrange(len(SYMPTOMS))
            agent = agent_map[symptom]
            steps.append(StepRecord(step=s, state_json=symptom_state(symptom, t, s).to_json(), agent_id=agent,
                                    agent_name=agent_name(agent), decided_by="teacher", is_hardcoded=False))
        out.append(EpisodeRecord(episode_id=f"{run_id}-{seed}-{t}", run_id=run_id, task_id=f"syn/blocks/{t}",
                                 family="classical", domain_name="blocks", policy_name="scripted",
                                 policy_version="1", llm_backend="sim", success_validator=True,
                                 success_oracle=True, steps=steps))
    return out


def train_version(out_dir, agent_map: tuple[int, ...], version: str, seed: int = 0):
    """Train a real fast policy on the map and pin its manifest version."""
    from train.fast_policy import train_fast_policy
    from train.manifest import Manifest

    manifest = train_fast_policy(episodes(agent_map, seed=seed), out_dir, name="serve-test")
    manifest.version = version
    manifest.save(out_dir)
    return Manifest.load(out_dir)

"""Helpers shared by the refinement-loop environment tests."""

from __future__ import annotations

import asyncio
import random

import solvers
from rollout.agents.base import AgentContext
from rollout.core.state import EpisodeState
from rollout.loop.evaluation import evaluate
from rollout.sim import Fault, SimConfig, SimWorld
from rollout.tasks import Task

# A world whose agents always repair their own class and never break anything.
CERTAIN = SimConfig(repair_prob=1.0, secondary_repair_prob=1.0, idle_fault_prob=0.0, side_effect_prob=0.0,
                    latency_scale=0.0)


def world_with(task: Task, faults: list[Fault], config: SimConfig = CERTAIN) -> SimWorld:
    world = SimWorld(task, config, seed=0)
    world.faults = list(faults)
    return world


def evaluated_state(task: Task, domain: str, problem: str, plan: str) -> EpisodeState:
    """The state the loop would build: validate a given plan, or plan first when there is none."""
    state = EpisodeState(task_description=task.description, domain=domain, problem=problem,
                         target_planner=task.target_planner)
    asyncio.run(evaluate(state, plan, not plan, task.target_planner, solvers.Limits())).apply_to(state)
    return state


def context(task: Task, world: SimWorld | None = None) -> AgentContext:
    return AgentContext(task=task, limits=solvers.Limits(), rng=random.Random(0), stand_in=world)

"""One plan job's refinement loop, resumable from its last committed step.

`ResumableEnv` is the loop's RefinementEnv (rollout/loop/env.py) plus `checkpoint()` and
`restore()`: the state the policy decides on next, the episode's counters, the agents' random
stream and (simulated world) the world's hidden faults and random stream, all as JSON. A job
writes a checkpoint after every step, before the next one starts; after a restart it restores
the last one and goes on, so a committed step never runs again and the resumed episode takes
the same path the uninterrupted one would have (tests/serve/test_plan_episode.py).

`run_plan` steps the environment under a job's budget {max_steps, max_llm_calls, max_usd}; the
job's wall-clock limit is the runner's (serve/plan_runner.py).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from rollout.agents.base import AgentContext
from rollout.core.decision import Policy
from rollout.core.state import EpisodeState
from rollout.core.trajectory import StepRecord
from rollout.loop.env import EpisodeEnd, RefinementEnv
from rollout.loop.evaluation import evaluate
from rollout.sim.faults import Fault
from rollout.tasks.base import Task

CHECKPOINT_VERSION = 1


def rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, data: list[Any]) -> None:
    rng.setstate((data[0], tuple(data[1]), data[2]))


def world_snapshot(world: Any) -> dict[str, Any] | None:
    """The simulated world's hidden state (faults, renaming, its random stream); None without one."""
    if world is None:
        return None
    return {"rng": rng_state(world.rng), "faults": [{"kind": f.kind, "params": f.params} for f in world.faults],
            "rename": dict(world.rename), "hint": world.hint, "started_empty": world.started_empty,
            "draft_plan": world.draft_plan, "draft_plan_fault": world.draft_plan_fault}


def restore_world(world: Any, data: dict[str, Any] | None) -> None:
    if world is None or data is None:
        return
    set_rng_state(world.rng, data["rng"])
    world.faults = [Fault(f["kind"], f["params"]) for f in data["faults"]]
    world.rename = dict(data["rename"])
    world.hint, world.started_empty = bool(data["hint"]), bool(data["started_empty"])
    world.draft_plan, world.draft_plan_fault = data["draft_plan"], data["draft_plan_fault"]


class ResumableEnv(RefinementEnv):
    """A RefinementEnv whose episode can be saved between steps and restored in another process."""

    async def start(self, task: Task, seed: int, domain: str = "", problem: str = "") -> EpisodeState:
        """`reset`, then (no simulated world) start from the request's own PDDL when it gave some."""
        state = await self.reset(task, seed)
        if self._world is None and (domain or problem) and not self.done:
            state.domain, state.problem = domain, problem
            if domain and problem:
                ev = await evaluate(state, "", True, task.target_planner, self.limits)
                ev.apply_to(state)
                self.solver_cpu_s += ev.solver_cpu_s
            self._hand_over(state, 0)
        return state

    def checkpoint(self) -> dict[str, Any]:
        """Everything the next step depends on (JSON)."""
        assert self._ctx is not None
        return {"version": CHECKPOINT_VERSION, "step": self._step, "state_json": self._state_json,
                "solver_cpu_s": self.solver_cpu_s, "agents_rng": rng_state(self._ctx.rng),
                "world": world_snapshot(self._world), "end": asdict(self.end) if self.end else None}

    def restore(self, task: Task, seed: int, checkpoint: dict[str, Any], steps: list[StepRecord]) -> EpisodeState:
        """The episode as `checkpoint` left it (steps: the records committed up to it)."""
        if checkpoint.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"checkpoint version {checkpoint.get('version')!r} is not {CHECKPOINT_VERSION}")
        self._task, self._world = task, self.backend.world(task, seed)
        restore_world(self._world, checkpoint["world"])
        rng = random.Random()
        set_rng_state(rng, checkpoint["agents_rng"])
        self._ctx = AgentContext(task=task, limits=self.limits, rng=rng, llm=self.backend.llm, stand_in=self._world,
                                 llm_backend_name=self.backend.name)
        self.steps, self.solver_cpu_s = list(steps), float(checkpoint["solver_cpu_s"])
        self.end = EpisodeEnd(**checkpoint["end"]) if checkpoint["end"] else None
        state = EpisodeState.from_json(checkpoint["state_json"])
        self._state, self._step, self._state_json = state, int(checkpoint["step"]), checkpoint["state_json"]
        return state


@dataclass(frozen=True)
class Budget:
    max_steps: int
    max_llm_calls: int
    max_usd: float
    max_seconds: float

    def overrun(self, steps: list[StepRecord], before_step: bool) -> str:
        """Why the job must stop ("" when it may go on): spent (before a step) or exceeded (after one)."""
        calls = sum(s.llm_calls for s in steps)
        usd = sum(s.cost_usd for s in steps)
        if calls > self.max_llm_calls or before_step and calls >= self.max_llm_calls > 0:
            return f"budget exhausted: {calls} LLM calls of max_llm_calls={self.max_llm_calls}"
        if usd > self.max_usd or before_step and usd >= self.max_usd > 0:
            return f"budget exhausted: ${usd:.4f} of max_usd={self.max_usd:g}"
        return ""


# Called after every step with the new step records and the checkpoint that follows them; it must
# make both durable before it returns (the next step starts only then).
OnSteps = Callable[[list[StepRecord], dict[str, Any]], Awaitable[None]]


async def run_plan(env: ResumableEnv, policy: Policy, state: EpisodeState, budget: Budget,
                   on_steps: OnSteps) -> str:
    """Step until the episode ends or the budget stops it; returns the budget's reason or ""."""
    while not env.done:
        if reason := budget.overrun(env.steps, before_step=True):
            return reason
        known = len(env.steps)
        result = await env.step(await policy.adecide(state))
        state = result.state
        await on_steps(env.steps[known:], env.checkpoint())
        if reason := budget.overrun(env.steps, before_step=False):
            return reason
    return ""


def outcome_error(end: EpisodeEnd | None, max_steps: int) -> str:
    """Why a loop that ended by itself gave no plan ("" for a validated plan)."""
    if end is not None and end.success_validator:
        return ""
    return f"no plan the validator accepts within max_steps={max_steps}"

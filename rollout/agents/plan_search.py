"""Scoring candidate plans for the deterministic repair agents (13-17).

Two evaluators share one interface: `SimEvaluator` runs the plan in the PDDL simulator of
`rollout.pddl.state_space` (thousands of candidates per second), `ValidatorEvaluator` calls the real
validator (a few per second) and is used when the simulator cannot model the domain. Either
way the agent's final answer is re-checked by `solvers.validate`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import solvers
from rollout.pddl.model import Atom
from rollout.pddl.state_space import SimResult, Step, World, simulate
from solvers.errors import HaloError

_STEP_RE = re.compile(r"\bstep (\d+)\b")


class BudgetExhausted(HaloError):
    """The search used up its evaluation budget."""


@dataclass(frozen=True)
class Evaluation:
    valid: bool
    executed: int  # steps applied before the first failure
    goal_score: int  # goal conjuncts satisfied at the end (0 when unknown)
    failing_index: int | None  # 0-based index of the first step that cannot be applied
    states: tuple[frozenset[Atom], ...] | None = None  # only from the simulator

    @property
    def score(self) -> tuple[int, int, int]:
        return (int(self.valid), self.executed, self.goal_score)


def plan_text(plan: Sequence[Step]) -> str:
    return "".join("(" + " ".join((name, *args)) + ")\n" for name, args in plan)


@dataclass
class SolverClock:
    """Solver time spent by one agent call (CPU where the solver reports it, wall otherwise)."""

    seconds: float = 0.0
    validator_calls: int = 0
    planner_calls: int = 0

    def validate(self, domain: str, problem: str, text: str, limits: solvers.Limits) -> solvers.ValidationResult:
        t0 = time.monotonic()
        result = solvers.validate(domain, problem, text, limits=limits)
        self.seconds += result.cpu_s or result.wall_s or (time.monotonic() - t0)
        self.validator_calls += 1
        return result

    def plan(self, domain: str, problem: str, limits: solvers.Limits) -> solvers.PlanResult:
        t0 = time.monotonic()
        result = solvers.plan(domain, problem, limits=limits)
        self.seconds += result.cpu_s or result.wall_s or (time.monotonic() - t0)
        self.planner_calls += 1
        return result


@dataclass
class Evaluator:
    max_evaluations: int
    used: int = 0
    cache: dict[tuple[Step, ...], Evaluation] = field(default_factory=dict)

    def evaluate(self, plan: Sequence[Step]) -> Evaluation:
        key = tuple(plan)
        if key in self.cache:
            return self.cache[key]
        if self.used >= self.max_evaluations:
            raise BudgetExhausted(f"evaluation budget of {self.max_evaluations} used up")
        self.used += 1
        result = self._evaluate(key)
        self.cache[key] = result
        return result

    def _evaluate(self, plan: tuple[Step, ...]) -> Evaluation:
        raise NotImplementedError

    @property
    def has_states(self) -> bool:
        return False


@dataclass
class SimEvaluator(Evaluator):
    world: World | None = None

    def _evaluate(self, plan: tuple[Step, ...]) -> Evaluation:
        assert self.world is not None
        sim: SimResult = simulate(self.world, plan)
        goal = self.world.goal_atoms_satisfied(sim.states[-1])
        return Evaluation(sim.valid, sim.executed, goal, sim.failing_index, sim.states)

    @property
    def has_states(self) -> bool:
        return True


@dataclass
class ValidatorEvaluator(Evaluator):
    domain: str = ""
    problem: str = ""
    limits: solvers.Limits = field(default_factory=solvers.Limits)
    clock: SolverClock = field(default_factory=SolverClock)

    def _evaluate(self, plan: tuple[Step, ...]) -> Evaluation:
        result = self.clock.validate(self.domain, self.problem, plan_text(plan), self.limits)
        if result.valid:
            return Evaluation(True, len(plan), 1, None)
        failing = result.failing_step
        if failing is None:
            match = _STEP_RE.search(result.output_tail)
            failing = int(match.group(1)) if match else None
        if failing is not None and 1 <= failing <= len(plan):
            return Evaluation(False, failing - 1, 0, failing - 1)
        if "goal" in (result.unreached_goal or result.output_tail):
            return Evaluation(False, len(plan), 0, None)
        return Evaluation(False, -1, 0, 0)


def failing_step_hint(validator_errors: str) -> int | None:
    """The 1-based failing step the validator reported in the state, if any."""
    match = _STEP_RE.search(validator_errors or "")
    return int(match.group(1)) if match else None

"""Deterministic repair agents 13-17: plan-level search checked by the real validator.

Each agent reads the domain, problem and plan of the EpisodeState, searches for a repaired plan
(scored in the PDDL simulator when it can model the domain, by the validator otherwise), and
returns it only after `solvers.validate` accepts it. Agent 17 also calls the planner on
sub-problems. The search runs in a worker thread so an episode loop stays responsive.

Search limits come from `ctx.extras["deterministic"]` (keys of `SearchConfig`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields

import solvers
from rollout.agents.base import Agent, AgentContext, AgentOutcome
from rollout.agents.plan_search import (
    BudgetExhausted,
    Evaluation,
    Evaluator,
    SimEvaluator,
    SolverClock,
    ValidatorEvaluator,
    failing_step_hint,
    plan_text,
)
from rollout.core.agent_table import AgentId
from rollout.core.state import EpisodeState
from rollout.pddl.model import PDDLParseError, Unsupported
from rollout.pddl.state_space import Step, World, load_world, render_problem
from solvers.errors import HaloError


@dataclass(frozen=True)
class SearchConfig:
    beam_width: int = 4
    max_depth: int = 4  # edits per search branch
    window: int = 2  # also edit this many steps before the failing one
    max_evaluations: int = 5000  # simulator evaluations per agent call
    max_validations: int = 40  # validator evaluations per call when the simulator cannot be used
    max_permutations: int = 120  # per step (arity 5)
    max_planner_calls: int = 6  # agent 17

    @classmethod
    def from_extras(cls, extras: dict) -> SearchConfig:
        given = extras.get("deterministic", {}) or {}
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in given.items() if k in known})


@dataclass
class RepairInput:
    state: EpisodeState
    plan: list[Step]
    world: World | None  # None: the simulator cannot model this domain
    evaluator: Evaluator
    clock: SolverClock
    config: SearchConfig
    limits: solvers.Limits


class RepairFailed(HaloError):
    """The agent found no plan it can vouch for; the message says why."""


class DeterministicAgent(Agent):
    needs_simulator = False

    async def apply(self, state: EpisodeState, ctx: AgentContext, *,
                    dynamic_profile: str | None = None) -> AgentOutcome:
        return await asyncio.to_thread(self._apply_sync, state, ctx)

    def _apply_sync(self, state: EpisodeState, ctx: AgentContext) -> AgentOutcome:
        t0 = time.perf_counter()
        clock = SolverClock()

        def outcome(ok: bool, message: str, plan: str = "") -> AgentOutcome:
            return AgentOutcome(state.domain, state.problem, plan=plan if ok else "", ok=ok,
                                message=f"{self.name}: {message}", solver_cpu_s=clock.seconds,
                                latency_ms=(time.perf_counter() - t0) * 1000.0)

        try:
            inp = self._prepare(state, ctx, clock)
            new_plan, what = self.repair(inp)
        except RepairFailed as exc:
            return outcome(False, str(exc))
        except BudgetExhausted as exc:
            return outcome(False, f"no repair found ({exc})")
        except PDDLParseError as exc:
            return outcome(False, f"cannot model the domain: {exc}")
        text = plan_text(new_plan)
        verdict = clock.validate(state.domain, state.problem, text, ctx.limits)
        if not verdict.valid:
            tail = verdict.output_tail.strip().splitlines()[:2]
            return outcome(False, f"candidate rejected by the validator: {' | '.join(tail)}")
        return outcome(True, what, text)

    def _prepare(self, state: EpisodeState, ctx: AgentContext, clock: SolverClock) -> RepairInput:
        if not state.plan.strip():
            raise RepairFailed("there is no plan to repair")
        try:
            parsed = solvers.parse_plan(state.plan)
        except ValueError as exc:
            raise RepairFailed(f"the plan does not parse: {exc}") from None
        if any(s.start is not None for s in parsed):
            raise RepairFailed("temporal plans are not handled by the deterministic agents")
        plan = [(s.name, tuple(s.args)) for s in parsed]
        config = SearchConfig.from_extras(ctx.extras)
        world: World | None
        try:
            world = load_world(state.domain, state.problem)
        except Unsupported as exc:
            if self.needs_simulator:
                raise RepairFailed(f"needs the plan simulator, which cannot model this domain: {exc}") from None
            world = None
        except PDDLParseError as exc:
            raise RepairFailed(f"cannot read the domain/problem: {exc}") from None
        evaluator: Evaluator
        if world is not None:
            evaluator = SimEvaluator(config.max_evaluations, world=world)
        else:
            evaluator = ValidatorEvaluator(config.max_validations, domain=state.domain, problem=state.problem,
                                           limits=ctx.limits, clock=clock)
        return RepairInput(state, plan, world, evaluator, clock, config, ctx.limits)

    def repair(self, inp: RepairInput) -> tuple[list[Step], str]:
        raise NotImplementedError


def _first_problem(ev: Evaluation, plan: Sequence[Step], inp: RepairInput) -> int:
    """Where to edit: the simulator's failing step, else the validator's hint, else the end."""
    if ev.failing_index is not None:
        return ev.failing_index
    hint = failing_step_hint(inp.state.validator_errors)
    if hint is not None and 1 <= hint <= len(plan):
        return hint - 1
    return len(plan) - 1


def _beam_search(inp: RepairInput, neighbours, label: str) -> tuple[list[Step], str]:
    """Generic beam search: `neighbours(plan, evaluation)` yields (edited plan, description)."""
    ev0 = inp.evaluator.evaluate(inp.plan)
    if ev0.valid:
        return inp.plan, "plan already valid; nothing to change"
    beam: list[tuple[list[Step], Evaluation, list[str]]] = [(inp.plan, ev0, [])]
    seen = {tuple(inp.plan)}
    for _ in range(inp.config.max_depth):
        candidates: list[tuple[list[Step], Evaluation, list[str]]] = []
        for plan, ev, edits in beam:
            for new, desc in neighbours(plan, ev):
                key = tuple(new)
                if key in seen:
                    continue
                seen.add(key)
                new_ev = inp.evaluator.evaluate(new)
                if new_ev.valid:
                    return new, f"{label}: " + "; ".join(edits + [desc])
                candidates.append((new, new_ev, edits + [desc]))
        if not candidates:
            break
        candidates.sort(key=lambda c: c[1].score, reverse=True)
        beam = candidates[: inp.config.beam_width]
    raise RepairFailed(f"no valid plan within depth {inp.config.max_depth} "
                       f"({inp.evaluator.used} candidates evaluated)")


def _fmt(step: Step) -> str:
    return "(" + " ".join((step[0], *step[1])) + ")"


class AgentVariableSwapper(DeterministicAgent):
    """13: beam search over argument permutations of the steps around the first failure."""

    agent_id = AgentId.VARIABLE_SWAPPER

    def repair(self, inp: RepairInput) -> tuple[list[Step], str]:
        def neighbours(plan: list[Step], ev: Evaluation):
            if ev.failing_index is not None:
                at = _first_problem(ev, plan, inp)
                positions = range(max(0, at - inp.config.window), at + 1)
            else:  # every step applies but the goal is missed: any step may carry swapped arguments
                positions = range(len(plan) - 1, -1, -1)
            for pos in positions:
                name, args = plan[pos]
                perms = itertools.islice(itertools.permutations(args), inp.config.max_permutations)
                for perm in perms:
                    if perm == args:
                        continue
                    new = list(plan)
                    new[pos] = (name, perm)
                    yield new, f"step {pos + 1} {_fmt(plan[pos])} -> {_fmt(new[pos])}"

        return _beam_search(inp, neighbours, "swapped arguments")


class AgentActionReorderer(DeterministicAgent):
    """14: circular shifts of the plan, then dependency-aware moves and adjacent swaps."""

    agent_id = AgentId.ACTION_REORDERER

    def repair(self, inp: RepairInput) -> tuple[list[Step], str]:
        plan = inp.plan
        if inp.evaluator.evaluate(plan).valid:
            return plan, "plan already valid; nothing to change"
        for k in range(1, len(plan)):
            rotated = plan[k:] + plan[:k]
            if inp.evaluator.evaluate(rotated).valid:
                return rotated, f"circular shift by {k} steps"

        def neighbours(cur: list[Step], ev: Evaluation):
            at = _first_problem(ev, cur, inp)
            # Steps after the failure that establish something the failing step needs move first.
            for j in self._providers(inp, cur, ev, at):
                new = cur[:at] + [cur[j]] + cur[at:j] + cur[j + 1:]
                yield new, f"moved step {j + 1} {_fmt(cur[j])} before step {at + 1}"
            for a in (at - 1, at):
                if 0 <= a < len(cur) - 1:
                    new = list(cur)
                    new[a], new[a + 1] = new[a + 1], new[a]
                    yield new, f"swapped steps {a + 1} and {a + 2}"
            tail = cur[at:]
            for k in range(1, len(tail)):
                yield cur[:at] + tail[k:] + tail[:k], f"shifted steps {at + 1}.. by {k}"

        return _beam_search(inp, neighbours, "reordered")

    @staticmethod
    def _providers(inp: RepairInput, plan: list[Step], ev: Evaluation, at: int) -> list[int]:
        if inp.world is None or ev.states is None or at >= len(plan):
            return list(range(at + 1, len(plan)))
        world, state = inp.world, ev.states[min(at, len(ev.states) - 1)]
        try:
            needed = {tuple(lit) for lit in world.ground_precondition_atoms(*plan[at])
                      if lit and lit[0] != "not"}
        except (KeyError, Unsupported):
            return list(range(at + 1, len(plan)))
        missing = {a for a in needed if a not in state}
        out = []
        for j in range(at + 1, len(plan)):
            try:
                adds = world.added_atoms(state, *plan[j])
            except KeyError:
                continue
            if adds & missing:
                out.append(j)
        return out or list(range(at + 1, len(plan)))


class AgentRedundancyStripper(DeterministicAgent):
    """15: drops duplicated steps, pairs whose second step undoes the first, and useless steps."""

    agent_id = AgentId.REDUNDANCY_STRIPPER

    def repair(self, inp: RepairInput) -> tuple[list[Step], str]:
        plan, removed = list(inp.plan), []
        for _ in range(len(inp.plan)):
            ev = inp.evaluator.evaluate(plan)
            step = self._structural_removal(inp, plan, ev)
            if step is None:
                break
            new, what = step
            new_ev = inp.evaluator.evaluate(new)
            if ev.valid and not new_ev.valid:
                break
            plan = new
            removed.append(what)
        if not inp.evaluator.evaluate(plan).valid:
            raise RepairFailed("removing duplicated or undone steps did not give a valid plan"
                               + (f" (removed: {'; '.join(removed)})" if removed else ""))
        # Greedy: drop any single step the plan stays valid without (from the end backwards).
        i = len(plan) - 1
        while i >= 0:
            new = plan[:i] + plan[i + 1:]
            if inp.evaluator.evaluate(new).valid:
                removed.append(f"useless {_fmt(plan[i])}")
                plan = new
            i -= 1
        if not removed:
            return plan, "no redundant step found; plan unchanged"
        return plan, f"removed {len(inp.plan) - len(plan)} steps: " + "; ".join(removed)

    @staticmethod
    def _structural_removal(inp: RepairInput, plan: list[Step], ev: Evaluation) -> tuple[list[Step], str] | None:
        limit = ev.failing_index + 1 if ev.failing_index is not None else len(plan)
        for i in range(1, min(limit, len(plan))):
            if plan[i] == plan[i - 1]:
                return plan[:i] + plan[i + 1:], f"duplicate {_fmt(plan[i])} at step {i + 1}"
        if ev.states is not None:
            states = ev.states
            for i in range(len(states) - 2):  # step i undone by step i+1: same state two steps later
                if states[i] == states[i + 2]:
                    return plan[:i] + plan[i + 2:], f"{_fmt(plan[i])} undone by {_fmt(plan[i + 1])}"
            for i in range(len(states) - 1):
                if states[i] == states[i + 1]:
                    return plan[:i] + plan[i + 1:], f"no-effect {_fmt(plan[i])}"
        if ev.failing_index is not None:  # the failing step itself may be a stray extra
            i = ev.failing_index
            return plan[:i] + plan[i + 1:], f"inapplicable {_fmt(plan[i])} at step {i + 1}"
        return None


class AgentPlanTruncator(DeterministicAgent):
    """16: keeps the shortest prefix after which the goal holds."""

    agent_id = AgentId.PLAN_TRUNCATOR

    def repair(self, inp: RepairInput) -> tuple[list[Step], str]:
        plan = inp.plan
        if inp.world is not None:
            ev = inp.evaluator.evaluate(plan)
            assert ev.states is not None
            for k, state in enumerate(ev.states):
                if k > 0 and inp.world.goal_reached(state):
                    return plan[:k], self._what(k, len(plan))
            raise RepairFailed(f"no prefix of the plan reaches the goal "
                               f"(steps 1..{ev.executed} apply; step {ev.executed + 1} fails)"
                               if ev.failing_index is not None else "no prefix of the plan reaches the goal")
        for k in range(1, len(plan) + 1):  # validator-only: shortest accepted prefix
            if inp.evaluator.evaluate(plan[:k]).valid:
                return plan[:k], self._what(k, len(plan))
        raise RepairFailed("no prefix of the plan reaches the goal")

    @staticmethod
    def _what(k: int, n: int) -> str:
        return f"cut the plan after step {k} of {n}" if k < n else "the full plan is the first goal-reaching prefix"


class AgentSubplanFiller(DeterministicAgent):
    """17: keeps the longest valid prefix and asks the planner to bridge to the next segment."""

    agent_id = AgentId.SUBPLAN_FILLER
    needs_simulator = True

    def repair(self, inp: RepairInput) -> tuple[list[Step], str]:
        assert inp.world is not None
        plan, notes = list(inp.plan), []
        for _ in range(inp.config.max_planner_calls):
            if inp.clock.planner_calls >= inp.config.max_planner_calls:
                break
            ev = inp.evaluator.evaluate(plan)
            if ev.valid:
                break
            assert ev.states is not None
            gap = ev.failing_index if ev.failing_index is not None else len(plan)
            reached = ev.states[gap]
            filled = self._bridge(inp, plan, gap, reached, notes)
            if filled is None:
                break
            plan = filled
        if not inp.evaluator.evaluate(plan).valid:
            raise RepairFailed("could not fill the gaps: " + ("; ".join(notes) or "planner found nothing"))
        if not notes:
            return plan, "plan already valid; nothing to fill"
        return plan, "; ".join(notes)

    def _bridge(self, inp: RepairInput, plan: list[Step], gap: int, reached, notes: list[str]) -> list[Step] | None:
        world = inp.world
        assert world is not None
        # Next kept segment starts at the failing step: plan to its precondition.
        if gap < len(plan):
            try:
                pre = world.ground_precondition_atoms(*plan[gap])
                sub = self._plan_from(inp, reached, ["and", *pre])
                if sub is not None:
                    candidate = plan[:gap] + sub + plan[gap:]
                    if inp.evaluator.evaluate(candidate).score > inp.evaluator.evaluate(plan).score:
                        notes.append(f"inserted {len(sub)} steps before step {gap + 1} {_fmt(plan[gap])}")
                        return candidate
            except (KeyError, Unsupported):
                pass
        if inp.clock.planner_calls >= inp.config.max_planner_calls:
            return None
        # Otherwise finish the job from the longest valid prefix.
        sub = self._plan_from(inp, reached, world.problem.goal)
        if sub is None:
            notes.append(f"the planner found no plan from the state after step {gap}")
            return None
        notes.append(f"kept steps 1..{gap} and planned the remaining {len(sub)} steps to the goal")
        return plan[:gap] + sub

    @staticmethod
    def _plan_from(inp: RepairInput, init, goal) -> list[Step] | None:
        assert inp.world is not None
        problem = render_problem(inp.world, init, goal)
        result = inp.clock.plan(inp.state.domain, problem, inp.limits)
        if not result.ok or result.plan is None:
            return None
        return [(s.name, tuple(s.args)) for s in result.plan]

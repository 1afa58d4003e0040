"""The refinement loop as an environment: `reset(task, seed)` -> state, `step(decision)` -> StepResult, `close()`.

One `RefinementEnv` runs one episode at a time (`reset` starts the next). Its LLM agents work on
an injected `AgentBackend` (rollout/loop/backends.py: the simulated world or real LLM agents); the
planner and validator are always real. `reset` drafts the starting PDDL when the backend's world
drafts one and evaluates it. Each `step` applies the decided agent, plans and validates what
changed and records a `StepRecord`. The episode is done when the decision is NoOp (11) on a plan
the validator accepts, or when the step budget is spent; then an accepted plan is rendered in
words by agent 12 (one more, rule-decided step) and the oracle checks the answer.

`snapshot()` / `restore(snapshot)` / `fork()` copy an episode at any step: the state, the
simulated world's faults and random stream, the agents' random stream, the records and the
counters, so two branches from one snapshot that take the same decisions write the same records
(search over agent choices, rollout/policies/search.py, branches this way), byte for byte but
for what a clock measures: the latency of a step no LLM took part in, and a planner's log of its
own timings unless the solvers' result cache answers the second time. Real LLM agents
keep no transcript between calls (each call's prompt is built from the state), so forking them is
forking the state. `check_acceptance()` spends one recorded call on an independent check of the
accepted PDDL against the task's words where the backend's world offers one.

Agent failures and task failures of the solvers are failed steps, never exceptions; a solver
tool failure (`solvers.ToolFailure`: the program, not the task, failed) propagates. Stepping an environment that was
never reset, whose episode is done, or that is closed raises `EnvStateError`. `close()` may be
called any number of times. What was recorded (`steps`, `solver_cpu_s`, `end`) stays readable
after an exception and after `close()`.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import solvers
from rollout.agents.base import (
    AcceptanceVerdict,
    AgentContext,
    AgentOutcome,
    ChatBackend,
    Draft,
    LLMStandIn,
    make_agent,
)
from rollout.core.agent_table import AgentId, agent_name
from rollout.core.decision import Decision
from rollout.core.infra import infra_reason
from rollout.core.state import EpisodeState
from rollout.core.trajectory import StepRecord
from rollout.loop.evaluation import evaluate
from rollout.loop.oracle import check_plan
from rollout.tasks.base import Task
from solvers.errors import HaloError

CHECKER_ID = AgentId.DEEP_THINK_PDDL  # the generalist agent (1) does the acceptance cross-check


class EnvStateError(HaloError, RuntimeError):
    """The environment was used out of order (step before reset, after done, after close)."""


class World(LLMStandIn, Protocol):
    """One episode's stand-in for the LLM agents (the simulated world): it also drafts the PDDL the loop starts from."""

    def draft(self) -> Draft: ...

    @property
    def name_map(self) -> dict[str, str]: ...


class AgentBackend(Protocol):
    """Where an episode's LLM agents do their work (rollout/loop/backends.py)."""

    name: str  # the episodes' llm_backend label ("sim" for the simulated world)

    @property
    def llm(self) -> ChatBackend | None: ...

    def world(self, task: Task, seed: int) -> World | None:
        """A fresh world for one episode; None when agents call a real LLM (no draft, no world)."""
        ...


@dataclass
class EpisodeEnd:
    """How a finished episode ended (filled in order, so an oracle failure keeps what came before)."""

    final_plan: str = ""
    success_validator: bool = False
    natural_language_plan: str = ""
    success_oracle: bool | None = None


@dataclass(frozen=True)
class EnvSnapshot:
    """An episode frozen at one step (`RefinementEnv.snapshot`); restoring it never changes it."""

    steps: tuple[StepRecord, ...]
    solver_cpu_s: float
    end: EpisodeEnd | None
    task: Task | None
    world: World | None  # a fork of the episode's world, owned by the snapshot
    agent_rng: tuple[Any, ...] | None  # the agents' random stream (random.Random.getstate())
    extras: dict[str, Any]
    state: EpisodeState | None
    state_json: str
    step: int
    checks: int


@dataclass
class StepResult:
    """`info`: "record" (this step's StepRecord); once done also "end" (EpisodeEnd) and "render"
    (the natural-language step's StepRecord, or None)."""

    state: EpisodeState
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


class RefinementEnv:
    def __init__(self, backend: AgentBackend, *, limits: solvers.Limits | None = None, max_steps: int = 10,
                 render_natural_language: bool = True) -> None:
        self.backend = backend
        self.limits = limits or solvers.Limits()
        self.max_steps = max_steps
        self.render_natural_language = render_natural_language
        # True (a search): a step that reaches the step limit with a plan the validator accepts does
        # not end the episode; the plan waits for its acceptance checks and the NoOp (or end_now)
        self.hold_valid_at_limit = False
        self.steps: list[StepRecord] = []
        self.solver_cpu_s = 0.0
        self.end: EpisodeEnd | None = None
        self._task: Task | None = None
        self._world: World | None = None
        self._ctx: AgentContext | None = None
        self._state: EpisodeState | None = None
        self._state_json = ""
        self._step = 0
        self._checks = 0  # acceptance checks so far: recorded steps that do not use the step budget
        self._closed = False

    @property
    def done(self) -> bool:
        return self.end is not None

    @property
    def state(self) -> EpisodeState | None:
        """The state the policy decides on next (None before reset and after close)."""
        return self._state

    async def reset(self, task: Task, seed: int) -> EpisodeState:
        """Start an episode of `task`; the state the policy decides on first."""
        if self._closed:
            raise EnvStateError("the environment is closed; make a new RefinementEnv")
        self.steps, self.solver_cpu_s, self.end = [], 0.0, None
        self._task, self._state, self._checks = task, None, 0
        self._world = self.backend.world(task, seed)
        rng = random.Random(f"agents|{seed}|{task.task_id}")
        self._ctx = AgentContext(task=task, limits=self.limits, rng=rng, llm=self.backend.llm, stand_in=self._world,
                                 llm_backend_name=self.backend.name)
        state = EpisodeState(task_description=task.description, spec_json=task.spec_json,
                             target_planner=task.target_planner)
        if self._world is not None:
            draft = self._world.draft()
            state.domain, state.problem = draft.domain, draft.problem
            if draft.domain:
                ev = await evaluate(state, draft.plan, not draft.plan, task.target_planner, self.limits)
                ev.apply_to(state)
                self.solver_cpu_s += ev.solver_cpu_s
        self._state = state
        if self.max_steps <= 0:
            await self._finish(state, {})
        else:
            self._hand_over(state, 0)
        return state

    async def step(self, decision: Decision) -> StepResult:
        """Apply the decided agent; plan and validate what changed; the next state."""
        state = self._check_steppable()
        step, state_json = self._step, self._state_json
        if decision.agent_id == AgentId.NOOP:
            outcome = await self._apply_agent(AgentId.NOOP, state, decision)
            record = _step_record(step, state_json, decision, outcome, state)
            state.history = state.with_history(AgentId.NOOP)
            finished = bool(state.plan_valid)
        else:
            outcome = await self._apply_agent(decision.agent_id, state, decision)
            state = await self._next_state(state, outcome, decision)
            self.solver_cpu_s += outcome.solver_cpu_s
            record = _step_record(step, state_json, decision, outcome, state)
            finished = False
        self.steps.append(record)
        self._state = state
        info: dict[str, Any] = {"record": record}
        at_limit = step + 1 >= self.max_steps + self._checks
        if finished or (at_limit and not (self.hold_valid_at_limit and state.plan_valid)):
            await self._finish(state, info)
        else:
            self._hand_over(state, step + 1)
        return StepResult(state, self.done, info)

    def snapshot(self) -> EnvSnapshot:
        """The episode as it is now; `restore` (here or in another env of the same backend) goes on
        from exactly this point."""
        if self._closed:
            raise EnvStateError("snapshot() of a closed environment")
        ctx = self._ctx
        return EnvSnapshot(steps=tuple(self.steps), solver_cpu_s=self.solver_cpu_s,
                           end=replace(self.end) if self.end is not None else None, task=self._task,
                           world=_fork_world(self._world), agent_rng=ctx.rng.getstate() if ctx else None,
                           extras=dict(ctx.extras) if ctx else {}, state=_copy_state(self._state),
                           state_json=self._state_json, step=self._step, checks=self._checks)

    def restore(self, snap: EnvSnapshot) -> None:
        """Go back to `snap` (which stays usable: the world and streams are copied again)."""
        if self._closed:
            raise EnvStateError("restore() on a closed environment")
        self.steps, self.solver_cpu_s = list(snap.steps), snap.solver_cpu_s
        self.end = replace(snap.end) if snap.end is not None else None
        self._task, self._world = snap.task, _fork_world(snap.world)
        self._state, self._state_json, self._step = _copy_state(snap.state), snap.state_json, snap.step
        self._checks = snap.checks
        self._ctx = None
        if snap.task is not None and snap.agent_rng is not None:
            rng = random.Random()
            rng.setstate(snap.agent_rng)
            self._ctx = AgentContext(task=snap.task, limits=self.limits, rng=rng, llm=self.backend.llm,
                                     stand_in=self._world, llm_backend_name=self.backend.name,
                                     extras=dict(snap.extras))

    def fork(self, *, resample: int | None = None) -> RefinementEnv:
        """A second environment that goes on from this point independently (snapshot + restore).

        `resample=k`: the simulated world's calls in the fork are fresh samples (branch k of a
        search; rollout/sim/world.py SimWorld.fork) rather than a replay of this env's."""
        twin = RefinementEnv(self.backend, limits=self.limits, max_steps=self.max_steps,
                             render_natural_language=self.render_natural_language)
        twin.hold_valid_at_limit = self.hold_valid_at_limit
        snap = self.snapshot()
        if resample is not None and snap.world is not None:
            snap = replace(snap, world=_fork_world(snap.world, resample))
        twin.restore(snap)
        return twin

    @property
    def steps_left(self) -> int:
        """Agent steps left before the step limit (acceptance checks do not use it)."""
        return self.max_steps + self._checks - self._step

    def activate(self) -> None:
        """Make this episode's world the current one in this asyncio task (a branch of a search
        runs in the task that started the episode; simulated prompted teachers read it)."""
        activate = getattr(self._world, "activate", None)
        if activate is not None:
            activate()

    async def check_acceptance(self) -> AcceptanceVerdict | None:
        """One independent check of the current, validator-accepted PDDL against the task's words,
        recorded as a rule step of agent 1 (the cross-check) that does not use the step budget;
        None where the world offers none."""
        state = self._check_steppable()
        check = getattr(self._world, "check_acceptance", None)
        if check is None or not state.plan_valid:
            return None
        verdict = check(state)
        outcome = verdict.outcome
        wait = getattr(self._world, "wait", None)
        if wait is not None:
            outcome = await wait(outcome, state)
        decision = Decision(CHECKER_ID, "rule", reason="acceptance check: the PDDL against the task's words")
        record = _step_record(self._step, self._state_json, decision, outcome, state)
        self.steps.append(record)
        state.history = state.with_history(CHECKER_ID)
        self._checks += 1
        self._hand_over(state, self._step + 1)
        return verdict

    def adopt(self, steps: list[StepRecord], end: EpisodeEnd, solver_cpu_s: float) -> None:
        """Take a finished episode's records and end as this one's (a search's chosen branch and
        the tree it explored); the episode is then done."""
        self.steps, self.end, self.solver_cpu_s = list(steps), end, solver_cpu_s

    async def end_now(self, *, accept: bool = True) -> None:
        """End the episode on the current state (a search out of budget), as if the step budget ran
        out; `accept=False`: the loop declines the plan even if the validator accepts it (an
        acceptance check flagged it), so the episode gives no answer."""
        state = self._check_steppable()
        await self._finish(state, {}, declined=not accept)

    def close(self) -> None:
        """Release the episode's world and context (idempotent; the records stay readable)."""
        self._closed = True
        self._world = self._ctx = self._state = self._task = None

    # ------------------------------------------------------------------------------------------

    def _check_steppable(self) -> EpisodeState:
        if self._closed:
            raise EnvStateError("step() on a closed environment")
        if self.end is not None:
            raise EnvStateError("step() after the episode is done; reset() starts the next one")
        if self._state is None:
            raise EnvStateError("step() before reset()")
        return self._state

    def _hand_over(self, state: EpisodeState, step: int) -> None:
        # The step record keeps the state as the policy saw it, taken before the policy decides.
        self._step = state.step = step
        self._state_json = state.to_json()

    async def _next_state(self, state: EpisodeState, outcome: AgentOutcome, decision: Decision) -> EpisodeState:
        assert self._task is not None
        next_state = replace(state, history=state.with_history(decision.agent_id))
        if outcome.ok:
            pddl_changed = (outcome.domain, outcome.problem) != (state.domain, state.problem)
            next_state.domain, next_state.problem = outcome.domain, outcome.problem
            if outcome.proposed_solution:
                next_state.proposed_solution = outcome.proposed_solution
            if outcome.plan or pddl_changed:
                ev = await evaluate(next_state, outcome.plan, pddl_changed, self._task.target_planner, self.limits)
                ev.apply_to(next_state)
                self.solver_cpu_s += ev.solver_cpu_s
        return next_state

    async def _finish(self, state: EpisodeState, info: dict[str, Any], declined: bool = False) -> None:
        assert self._task is not None
        task = self._task
        accepted = bool(state.plan_valid) and not declined
        self.end = end = EpisodeEnd(final_plan=state.plan, success_validator=accepted)
        info["end"], info["render"] = end, None
        if accepted and self.render_natural_language:
            state.step = len(self.steps)
            state_json = state.to_json()
            decision = Decision(AgentId.NATURAL_LANGUAGE, "rule", reason="render the accepted plan for a person")
            outcome = await self._apply_agent(AgentId.NATURAL_LANGUAGE, state, decision)
            end.natural_language_plan = outcome.natural_language if outcome.ok else ""
            info["render"] = _step_record(state.step, state_json, decision, outcome, state)
            self.steps.append(info["render"])
        # Oracle-correct needs an answer: a plan the loop itself did not accept counts as no answer.
        if task.gold_domain or task.gold_plan:
            if not accepted:
                end.success_oracle = False
            else:
                name_map = self._world.name_map if self._world is not None else None
                verdict = await asyncio.to_thread(check_plan, task, state.plan, name_map=name_map,
                                                  limits=self.limits)
                end.success_oracle = verdict.correct
                self.solver_cpu_s += verdict.solver_cpu_s

    async def _apply_agent(self, agent_id: int, state: EpisodeState, decision: Decision | None) -> AgentOutcome:
        assert self._ctx is not None
        try:
            agent = make_agent(agent_id)
        except KeyError as exc:
            return AgentOutcome(state.domain, state.problem, ok=False, message=str(exc).strip("'\""))
        try:
            return await agent.apply(state, self._ctx,
                                     dynamic_profile=decision.dynamic_profile if decision else None)
        except Exception as exc:  # noqa: BLE001  (agents must not raise; if one does, the step fails)
            if infra_reason(exc):  # a dependency failed (LLM endpoint, ...): the episode is not an outcome
                raise
            return AgentOutcome(state.domain, state.problem, ok=False,
                                message=f"{agent_name(agent_id)} raised {type(exc).__name__}: {exc}")


def _fork_world(world: World | None, resample: int | None = None) -> World | None:
    if world is None:
        return None
    fork = getattr(world, "fork", None)
    if fork is None:
        raise EnvStateError(f"the backend's world ({type(world).__name__}) cannot be forked")
    return fork() if resample is None else fork(resample)


def _copy_state(state: EpisodeState | None) -> EpisodeState | None:
    return None if state is None else replace(state, history=list(state.history))


def _step_record(step: int, state_json: str, decision: Decision, outcome: AgentOutcome, after: EpisodeState
                 ) -> StepRecord:
    return StepRecord(
        step=step, state_json=state_json, agent_id=int(decision.agent_id), agent_name=decision.agent_name,
        decided_by=decision.decided_by, is_hardcoded=decision.is_hardcoded, decision_reason=decision.reason,
        decision_latency_ms=decision.latency_ms, domain_after=after.domain, problem_after=after.problem,
        plan_after=after.plan, plan_found=after.plan_found, plan_valid=after.plan_valid,
        error_category=after.error_category, agent_ok=outcome.ok, agent_message=outcome.message,
        # A step's LLM accounting covers both the orchestrator's decision (a prompted teacher) and the agent.
        llm_calls=outcome.llm_calls + decision.llm_calls, tokens_in=outcome.tokens_in + decision.tokens_in,
        tokens_out=outcome.tokens_out + decision.tokens_out, latency_ms=outcome.latency_ms,
        cost_usd=outcome.cost_usd + decision.cost_usd,
    )

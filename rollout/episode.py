"""The refinement loop: decide -> apply the agent -> plan -> validate -> next state.

The loop ends when the policy picks NoOp (11) on a plan the validator accepts, or when the step
budget runs out; a valid final plan is then rendered in natural language by agent 12 (recorded
as a last, rule-decided step). Agent and solver failures become failed steps, never exceptions;
an infrastructure failure (the policy itself breaking, a bug) ends the episode with
EpisodeRecord.error set.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
import traceback
from dataclasses import dataclass, field, replace

import solvers
from rollout.agent_table import NATURAL_LANGUAGE_ID, NOOP_ID, agent_name
from rollout.agents.base import AgentContext, AgentOutcome, ChatBackend, make_agent
from rollout.oracle import check_plan
from rollout.policy import Decision, Policy
from rollout.sim.world import SimConfig, SimWorld
from rollout.state import EpisodeState
from rollout.tasks.base import Task
from rollout.trajectory import EpisodeRecord, StepRecord

LOG_TAIL = 1500
_TMP_PATH = re.compile(r"/tmp/halo-[a-z]+-[A-Za-z0-9_]+/")


@dataclass
class EpisodeConfig:
    max_steps: int = 10
    llm_backend: str = "sim"  # "sim" or the name of a real backend (e.g. the model)
    seed: int = 0
    run_id: str = "adhoc"
    limits: solvers.Limits = field(default_factory=solvers.Limits)
    sim: SimConfig | None = field(default_factory=SimConfig)
    llm: ChatBackend | None = None
    code_version: str = ""
    render_natural_language: bool = True


def episode_id_for(run_id: str, task_id: str, seed: int) -> str:
    digest = hashlib.sha256(f"{run_id}|{task_id}|{seed}".encode()).hexdigest()[:20]
    return f"ep-{digest}"


def _clean(text: str) -> str:
    return _TMP_PATH.sub("", text)[-LOG_TAIL:]


@dataclass
class _Evaluation:
    plan: str
    plan_found: bool
    plan_valid: bool
    category: str
    validator_errors: str
    planner_log: str
    solver_cpu_s: float = 0.0


async def _validate(domain: str, problem: str, plan: str, limits: solvers.Limits) -> solvers.ValidationResult:
    return await asyncio.to_thread(solvers.validate, domain, problem, plan, limits=limits)


async def evaluate(state: EpisodeState, outcome_plan: str, pddl_changed: bool, planner: str,
                    limits: solvers.Limits) -> _Evaluation:
    """Run the real solvers on a step's new artefacts (as the loop does after an agent).

    An agent-supplied plan is validated; changed PDDL is planned and the plan validated; when
    the planner fails, the validator's diagnostics on the previous plan (parse errors, type
    mismatches, failing steps) are kept too. Solver exceptions become solver_crash.
    """
    try:
        return await _evaluate_inner(state, outcome_plan, pddl_changed, planner, limits)
    except Exception as exc:  # noqa: BLE001  (a solver wrapper bug must not end the episode)
        return _Evaluation(outcome_plan or state.plan, False, False, solvers.ErrorCategory.SOLVER_CRASH.value,
                           "", f"solver call failed: {type(exc).__name__}: {exc}")


async def _evaluate_inner(state: EpisodeState, outcome_plan: str, pddl_changed: bool, planner: str,
                          limits: solvers.Limits) -> _Evaluation:
    domain, problem = state.domain, state.problem
    if outcome_plan:
        v = await _validate(domain, problem, outcome_plan, limits)
        return _Evaluation(outcome_plan, True, v.valid, v.category.value,
                           "" if v.valid else _clean(v.output_tail or v.message), "", v.cpu_s)
    if not pddl_changed:
        raise AssertionError("nothing to evaluate")
    if not domain.strip():
        return _Evaluation("", False, False, solvers.ErrorCategory.INPUT_ERROR.value, "", "empty domain")
    result, v = await asyncio.to_thread(_plan_then_validate, domain, problem, planner, limits, state.plan)
    cpu = result.cpu_s or result.wall_s
    log = _clean(result.output_tail or result.message)
    if result.ok:
        return _Evaluation(result.plan_text, True, v.valid, v.category.value,
                           "" if v.valid else _clean(v.output_tail or v.message), log, cpu + v.cpu_s)
    category = result.category.value
    if v.category.is_parse_error:
        category = v.category.value
    errors = _clean(v.output_tail or v.message) if not v.valid else ""
    return _Evaluation(state.plan, False, False, category, errors, log, cpu + v.cpu_s)


def _plan_then_validate(domain: str, problem: str, planner: str, limits: solvers.Limits, previous_plan: str
                        ) -> tuple[solvers.PlanResult, solvers.ValidationResult]:
    """Both solver calls in one thread hand-off. The new plan is validated; when the planner failed,
    the previous plan (if any) is, as the validator's diagnostics are more specific (parse errors
    with positions, type mismatches, failing steps)."""
    result = solvers.plan(domain, problem, planner=planner, limits=limits)  # type: ignore[arg-type]
    plan = result.plan_text if result.ok else previous_plan
    return result, solvers.validate(domain, problem, plan, limits=limits)


def _apply_evaluation(state: EpisodeState, ev: _Evaluation) -> None:
    state.plan = ev.plan
    state.plan_found = ev.plan_found
    state.plan_valid = ev.plan_valid
    state.error_category = ev.category
    state.validator_errors = ev.validator_errors
    state.planner_log = ev.planner_log


def _solver_versions() -> str:
    fn = getattr(solvers, "versions", None)
    if fn is None:
        return "{}"
    try:
        return json.dumps(fn(), sort_keys=True, default=str)
    except Exception as exc:  # noqa: BLE001
        return json.dumps({"error": str(exc)})


async def _apply_agent(agent_id: int, state: EpisodeState, ctx: AgentContext, decision: Decision | None
                       ) -> AgentOutcome:
    try:
        agent = make_agent(agent_id)
    except KeyError as exc:
        return AgentOutcome(state.domain, state.problem, ok=False, message=str(exc).strip("'\""))
    try:
        return await agent.apply(state, ctx, dynamic_profile=decision.dynamic_profile if decision else None)
    except Exception as exc:  # noqa: BLE001  (agents must not raise; if one does, the step fails)
        return AgentOutcome(state.domain, state.problem, ok=False,
                            message=f"{agent_name(agent_id)} raised {type(exc).__name__}: {exc}")


async def run_episode(task: Task, policy: Policy, config: EpisodeConfig, *, episode_id: str | None = None
                      ) -> EpisodeRecord:
    t_start = time.monotonic()
    eid = episode_id or episode_id_for(config.run_id, task.task_id, config.seed)
    record = EpisodeRecord(
        episode_id=eid, run_id=config.run_id, task_id=task.task_id, family=task.family,
        domain_name=task.domain_name, policy_name=policy.name, policy_version=policy.version,
        llm_backend=config.llm_backend, success_validator=False, success_oracle=None, seed=config.seed,
        code_version=config.code_version, solver_versions=_solver_versions(), created_at=time.time(),
        model_version=getattr(policy, "model_version", ""),
    )
    try:
        await _run_loop(task, policy, config, record)
    except Exception as exc:  # noqa: BLE001  (infrastructure failure: keep what was recorded)
        record.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"[-2000:]
    record.total_llm_calls = sum(s.llm_calls for s in record.steps)
    record.total_tokens_in = sum(s.tokens_in for s in record.steps)
    record.total_tokens_out = sum(s.tokens_out for s in record.steps)
    record.total_cost_usd = sum(s.cost_usd for s in record.steps)
    record.wall_s = time.monotonic() - t_start
    return record


async def _run_loop(task: Task, policy: Policy, config: EpisodeConfig, record: EpisodeRecord) -> None:
    sim: SimWorld | None = None
    if config.llm_backend == "sim":
        sim = SimWorld(task, config.sim or SimConfig(), seed=config.seed, transport=config.llm)
    rng = random.Random(f"agents|{config.seed}|{task.task_id}")
    ctx = AgentContext(task=task, limits=config.limits, rng=rng, llm=config.llm, sim=sim,
                       llm_backend_name=config.llm_backend)
    state = EpisodeState(task_description=task.description, spec_json=task.spec_json,
                         target_planner=task.target_planner)
    if sim is not None:
        draft = sim.draft()
        state.domain, state.problem = draft.domain, draft.problem
        if draft.domain:
            ev = await evaluate(state, draft.plan, not draft.plan, task.target_planner, config.limits)
            _apply_evaluation(state, ev)
            record.solver_cpu_s += ev.solver_cpu_s

    for step in range(config.max_steps):
        state.step = step
        state_json = state.to_json()
        decision = await policy.adecide(state)
        if decision.agent_id == NOOP_ID:
            outcome = await _apply_agent(NOOP_ID, state, ctx, decision)
            record.steps.append(_step_record(step, state_json, decision, outcome, state))
            state.history = state.with_history(NOOP_ID)
            if state.plan_valid:
                break
            continue
        outcome = await _apply_agent(decision.agent_id, state, ctx, decision)
        next_state = replace(state, history=state.with_history(decision.agent_id))
        if outcome.ok:
            pddl_changed = (outcome.domain, outcome.problem) != (state.domain, state.problem)
            next_state.domain, next_state.problem = outcome.domain, outcome.problem
            if outcome.proposed_solution:
                next_state.proposed_solution = outcome.proposed_solution
            if outcome.plan or pddl_changed:
                ev = await evaluate(next_state, outcome.plan, pddl_changed, task.target_planner, config.limits)
                _apply_evaluation(next_state, ev)
                record.solver_cpu_s += ev.solver_cpu_s
        record.solver_cpu_s += outcome.solver_cpu_s
        record.steps.append(_step_record(step, state_json, decision, outcome, next_state))
        state = next_state

    record.final_plan = state.plan
    record.success_validator = bool(state.plan_valid)
    if state.plan_valid and config.render_natural_language:
        state.step = len(record.steps)
        state_json = state.to_json()
        decision = Decision(NATURAL_LANGUAGE_ID, "rule", reason="render the accepted plan for a person")
        outcome = await _apply_agent(NATURAL_LANGUAGE_ID, state, ctx, decision)
        record.natural_language_plan = outcome.natural_language if outcome.ok else ""
        record.steps.append(_step_record(state.step, state_json, decision, outcome, state))
    # Oracle-correct needs an answer: a plan the loop itself did not accept counts as no answer.
    if task.gold_domain or task.gold_plan:
        if not state.plan_valid:
            record.success_oracle = False
        else:
            verdict = await asyncio.to_thread(check_plan, task, state.plan,
                                              name_map=sim.name_map if sim else None, limits=config.limits)
            record.success_oracle = verdict.correct
            record.solver_cpu_s += verdict.solver_cpu_s


def _step_record(step: int, state_json: str, decision: Decision, outcome: AgentOutcome, after: EpisodeState
                 ) -> StepRecord:
    return StepRecord(
        step=step, state_json=state_json, agent_id=decision.agent_id, agent_name=decision.agent_name,
        decided_by=decision.decided_by, is_hardcoded=decision.is_hardcoded, decision_reason=decision.reason,
        decision_latency_ms=decision.latency_ms, domain_after=after.domain, problem_after=after.problem,
        plan_after=after.plan, plan_found=after.plan_found, plan_valid=after.plan_valid,
        error_category=after.error_category, agent_ok=outcome.ok, agent_message=outcome.message,
        # A step's LLM accounting covers both the orchestrator's decision (a prompted teacher) and the agent.
        llm_calls=outcome.llm_calls + decision.llm_calls, tokens_in=outcome.tokens_in + decision.tokens_in,
        tokens_out=outcome.tokens_out + decision.tokens_out, latency_ms=outcome.latency_ms,
        cost_usd=outcome.cost_usd + decision.cost_usd,
    )


def run_episode_sync(task: Task, policy: Policy, config: EpisodeConfig, *, episode_id: str | None = None
                     ) -> EpisodeRecord:
    return asyncio.run(run_episode(task, policy, config, episode_id=episode_id))


async def run_episodes(tasks: list[Task], policy: Policy, config: EpisodeConfig, *, concurrency: int = 4
                       ) -> list[EpisodeRecord]:
    """Run many episodes in one event loop, at most `concurrency` at a time, in task order."""
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(task: Task) -> EpisodeRecord:
        async with sem:
            return await run_episode(task, policy, config)

    return list(await asyncio.gather(*(one(t) for t in tasks)))

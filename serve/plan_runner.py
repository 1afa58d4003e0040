"""The plan jobs' runner: one named Ray actor per application runs every /v1/plans job.

Replicas hand it requests (`submit`, `job`, `watch`, `cancel`); it runs each job's refinement
loop (serve/plan_episode.py) as an asyncio task, with the served orchestrator deciding (the rules
layer, then the model version the registry targets: serve/plan_orchestrator.py), the agents of
`plan_llm` (the simulated world or an OpenAI-protocol LLM) and the real solvers in the sandbox.
At most `max_running` jobs run at once (the rest wait `queued`); at most `max_jobs` unfinished
jobs in all (503 beyond) and `max_jobs_per_key` per key (429 beyond); a key past
`usd_per_key_per_hour` of LLM spend gets 429. Every step is written to the store before the
next one starts (serve/plan_jobs.py); a new runner (after a restart) resumes every unfinished
job from its last committed step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

import ray

import solvers
from rollout.core.infra import infra_reason
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord
from rollout.llm.backoff import RetryPolicy
from rollout.llm.budget import BudgetLimits
from rollout.tasks.base import Task
from serve.plan_budget import install_plan_budget
from serve.plan_episode import Budget, ResumableEnv, outcome_error, run_plan
from serve.plan_jobs import PLAN_CODE, PlanStore, body_fingerprint, job_id_for, last_checkpoint, new_job, step_summary
from serve.plan_schemas import TERMINAL, public_view
from solvers.errors import HaloError

VERIFY_RETRY = RetryPolicy(retries=3, initial_backoff_s=1.0, max_backoff_s=8.0)

log = logging.getLogger("halo.serve")
RUNNER_PREFIX = "halo-plan-runner"
SPEND_WINDOW_S = 3600.0


@dataclass(frozen=True)
class PlanSettings:
    store_url: str
    app_name: str  # the decision application whose deployment decides (the served orchestrator)
    llm_spec: str = "sim"  # --plan-llm: sim[:...] or openai:MODEL@URL (rollout/llm/spec.py)
    tasks_spec: str = "bundled"  # the tasks a request's task_id may name
    max_running: int = 32
    max_jobs: int = 256
    max_jobs_per_key: int = 64
    usd_per_key_per_hour: float = 20.0
    feedback_run_id: str = "serve-plans"
    solver_timeout_s: float = 20.0
    solver_memory_mb: int = 1024
    # The runner (every thread) and its solver processes yield the CPU to the replicas: confine_whole_process.
    nice: int = 19
    # Also the kernel's idle scheduling class (SCHED_IDLE): a replica that wakes preempts plan work
    # at once, where at nice 19 alone it may wait out the running solver's time slice.
    idle_class: bool = True
    cpus: tuple[int, ...] = ()  # CPU affinity of the runner and its solvers (empty: any)
    # Where the served model version is read from (serve/plan_orchestrator.py).
    registry_name: str = "halo-model-registry"
    registry_namespace: str = "halo"
    model_cache_dir: str = ""
    decision_budget_s: float = 0.08
    llm_limits: BudgetLimits = BudgetLimits()  # all plan jobs' LLM calls together (serve/plan_budget.py)


def runner_name(app_name: str) -> str:
    return f"{RUNNER_PREFIX}-{app_name}"


class JobRefused(HaloError):
    """A request the runner will not take: `outcome` says why (the route maps it to a status)."""

    def __init__(self, outcome: str, detail: str, field_name: str | None = None) -> None:
        super().__init__(detail)
        self.outcome, self.detail, self.field_name = outcome, detail, field_name


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=10_000)
class PlanRunner:
    def __init__(self, settings: PlanSettings) -> None:
        self.settings = settings
        # This actor's whole process (the solvers it starts inherit both).
        confine_whole_process(settings.nice, settings.cpus, settings.idle_class)
        self.store = PlanStore(settings.store_url)
        self.incarnation = uuid.uuid4().hex[:12]
        # Every LLM call of this process (agents, simulated world) leases from the service's budget.
        self.gate = install_plan_budget(settings.llm_limits, settings.app_name, settings.registry_namespace)
        self.jobs: dict[str, dict[str, Any]] = {}  # unfinished jobs, and finished ones once read
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._spend: dict[str, deque[tuple[float, float]]] = {}
        self._started: asyncio.Future[int] | None = None
        self._submitting: asyncio.Lock | None = None
        self._slots: asyncio.Semaphore | None = None
        self._episode_lock: asyncio.Lock | None = None
        self._known: dict[str, Task] | None = None
        self._backend: Any = None
        self._policy: Any = None
        self.counts = {"started": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "resumed": 0, "steps": 0}

    # -- start-up and resume ----------------------------------------------------------------------

    async def ready(self) -> int:
        """Start (once): resume every unfinished job of the store; returns how many were resumed."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            self._submitting, self._slots = asyncio.Lock(), asyncio.Semaphore(self.settings.max_running)
            self._episode_lock = asyncio.Lock()
            try:
                self._started.set_result(await self._resume_all())
            except Exception as exc:  # the store could not be read: every call says so, the actor lives
                log.exception("plan runner %s could not resume its jobs", self.incarnation)
                self._started.set_exception(exc)
        return await asyncio.shield(self._started)

    async def _resume_all(self) -> int:
        resumed = 0
        for job in await asyncio.to_thread(self.store.unfinished_jobs):  # the index: not every job ever
            job["_indexed"] = True
            if job["status"] == "running" or job["steps"]:
                job["resumed"] += 1
                resumed += 1
            self.jobs[job["id"]] = job
            self._launch(job)
        self.counts["resumed"] += resumed
        if resumed:
            log.warning("plan runner %s resumed %d unfinished job(s)", self.incarnation, resumed)
        return resumed

    # -- the API's calls --------------------------------------------------------------------------

    async def submit(self, key_name: str, idempotency_key: str, body: dict[str, Any]) -> dict[str, Any]:
        """{"created": bool, "job": view}, or {"refused": {outcome, detail, field}} (conflict, busy,
        busy_key, over_spend, invalid): answers, not exceptions, across the actor boundary."""
        await self.ready()
        assert self._submitting is not None
        fingerprint = body_fingerprint(body)
        async with self._submitting:  # one at a time: two equal requests must not make two jobs
            job_id = job_id_for(key_name, idempotency_key) if idempotency_key else f"plan-{uuid.uuid4().hex[:24]}"
            existing = await self._job(job_id)
            try:
                if existing is not None:
                    if existing["fingerprint"] != fingerprint:
                        raise JobRefused("conflict", "this Idempotency-Key was used with a different body",
                                         "Idempotency-Key")
                    return {"created": False, "job": public_view(existing)}
                self._admit(key_name, body)
            except JobRefused as refused:
                return {"refused": {"outcome": refused.outcome, "detail": refused.detail,
                                    "field": refused.field_name}}
            job = new_job(job_id, key_name, body, fingerprint)
            self.jobs[job_id] = job
            await self._save(job)
        self._launch(job)
        return {"created": True, "job": public_view(job)}

    async def job(self, job_id: str, key_name: str) -> dict[str, Any] | None:
        await self.ready()
        job = await self._owned(job_id, key_name)
        return None if job is None else public_view(job)

    async def watch(self, job_id: str, key_name: str, known_steps: int, known_status: str,
                    timeout_s: float) -> dict[str, Any] | None:
        """The job once it has more than `known_steps` steps or another status (or after timeout_s)."""
        await self.ready()
        job = await self._owned(job_id, key_name)
        if job is None:
            return None
        if len(job["steps"]) == known_steps and job["status"] == known_status and job["status"] not in TERMINAL:
            changed = self._changed.setdefault(job_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):  # nothing changed: the caller sends a keep-alive
                await asyncio.wait_for(changed.wait(), timeout_s)
        return public_view(job)

    async def cancel(self, job_id: str, key_name: str) -> dict[str, Any] | None:
        await self.ready()
        job = await self._owned(job_id, key_name)
        if job is None or job["status"] in TERMINAL:
            return None if job is None else public_view(job)
        job["status"], job["error"] = "cancelled", "cancelled by the client"
        task = self.tasks.pop(job_id, None)
        if task is not None:
            task.cancel()
        self.counts["cancelled"] += 1
        await self._save(job)
        self._notify(job_id)
        return public_view(job)

    def stats(self) -> dict[str, Any]:
        active = [j for j in self.jobs.values() if j["status"] not in TERMINAL]
        return {**self.counts, "active": len(active), "running": sum(j["status"] == "running" for j in active),
                "llm_gate": {**self.gate.stats.snapshot(), "limited": self.gate.limited},
                "incarnation": self.incarnation}

    # -- admission --------------------------------------------------------------------------------

    def _admit(self, key_name: str, body: dict[str, Any]) -> None:
        active = [j for j in self.jobs.values() if j["status"] not in TERMINAL]
        s = self.settings
        if len(active) >= s.max_jobs:
            raise JobRefused("busy", f"{s.max_jobs} plan jobs are unfinished; retry later")
        if sum(j["owner"] == key_name for j in active) >= s.max_jobs_per_key:
            raise JobRefused("busy_key", f"key {key_name} has {s.max_jobs_per_key} unfinished plan jobs")
        if s.usd_per_key_per_hour > 0 and self._spent(key_name) >= s.usd_per_key_per_hour:
            raise JobRefused("over_spend", f"key {key_name} spent over ${s.usd_per_key_per_hour:g} of LLM calls in "
                                           "the last hour")
        self._task_for(body)  # raises JobRefused("invalid") for a task the agents cannot work on

    def _spent(self, key_name: str) -> float:
        log_ = self._spend.setdefault(key_name, deque())
        while log_ and log_[0][0] < time.monotonic() - SPEND_WINDOW_S:
            log_.popleft()
        return sum(usd for _, usd in log_)

    def _task_for(self, body: dict[str, Any]) -> Task:
        """The task a request describes: a known task_id's (its gold PDDL for the oracle), with the
        request's own description; the simulated agents need a known task_id."""
        if self._known is None:
            from rollout.tasks import load_tasks

            self._known = {t.task_id: t for t in load_tasks(self.settings.tasks_spec)}
        task_id = body.get("task_id")
        known = self._known.get(task_id) if task_id else None
        simulated = self.settings.llm_spec.strip().startswith("sim")
        if simulated and known is None:
            detail = (f"unknown task_id {task_id!r}" if task_id else "task_id is required") + \
                " (the simulated agents work from a known task's gold PDDL)"
            raise JobRefused("invalid", detail, "task_id")
        if known is not None:
            return replace(known, description=body["task_description"], target_planner=body["target_planner"])
        return Task(task_id=task_id or "request", family="request", domain_name="",
                    description=body["task_description"], target_planner=body["target_planner"],
                    spec_json=body.get("spec_json"))

    # -- running a job ----------------------------------------------------------------------------

    def _launch(self, job: dict[str, Any]) -> None:
        self.tasks[job["id"]] = asyncio.get_running_loop().create_task(self._run_job(job))

    async def _run_job(self, job: dict[str, Any]) -> None:
        assert self._slots is not None
        async with self._slots:
            if job["status"] in TERMINAL:  # cancelled while it waited
                return
            job["status"] = "running"
            self.counts["started"] += 1
            await self._save(job)
            self._notify(job["id"])
            budget = Budget(**job["request"]["budget"])
            started = time.monotonic()
            try:
                async with asyncio.timeout(max(0.0, budget.max_seconds - job["elapsed_s"])):
                    env, reason = await self._loop(job, budget, started)
            except TimeoutError:
                env, reason = None, f"budget exhausted: max_seconds={budget.max_seconds:g}"
            except Exception as exc:  # a dependency (infra) or a bug: the job fails, the runner lives
                log.warning("plan job %s ended on %s", job["id"], type(exc).__name__, exc_info=True)
                env, reason = None, self._failure(job, exc)
            job["elapsed_s"] += time.monotonic() - started - job.pop("_counted_s", 0.0)
            await self._finish(job, env, reason)
        self.tasks.pop(job["id"], None)

    def _failure(self, job: dict[str, Any], exc: Exception) -> str:
        infra = infra_reason(exc)
        if infra:
            job["_infra"] = True
            return f"infrastructure failure (not an outcome; retry): {infra}"
        return f"internal error: {type(exc).__name__}"

    async def _loop(self, job: dict[str, Any], budget: Budget, started: float) -> tuple[ResumableEnv, str]:
        request = job["request"]
        task = self._task_for(request)
        env = ResumableEnv(self._agents(), max_steps=budget.max_steps,
                           limits=solvers.Limits(timeout_s=self.settings.solver_timeout_s,
                                                 memory_mb=self.settings.solver_memory_mb))
        checkpoint, records = last_checkpoint(await asyncio.to_thread(self.store.read_steps, job["id"]))
        if checkpoint is not None:
            state = env.restore(task, request["seed"], checkpoint, records)
            job["steps"] = [step_summary(r) for r in records]
        else:
            state = await env.start(task, request["seed"], request["domain"], request["problem"])
        job["domain"], job["problem"] = state.domain, state.problem

        async def on_steps(new: list[StepRecord], after: dict[str, Any]) -> None:
            await self._commit_steps(job, new, after, started)

        try:
            return env, await run_plan(env, self._orchestrator(), state, budget, on_steps)
        finally:
            env.close()

    async def _commit_steps(self, job: dict[str, Any], new: list[StepRecord], checkpoint: dict[str, Any],
                            started: float) -> None:
        """Make the steps durable (their checkpoint last), then show them."""
        for i, record in enumerate(new):
            await asyncio.to_thread(self.store.write_step, job["id"], record,
                                    checkpoint if i == len(new) - 1 else None, self.incarnation)
        job["steps"].extend(step_summary(r) for r in new)
        last = EpisodeState.from_json(checkpoint["state_json"])
        job["domain"], job["problem"] = new[-1].domain_after or last.domain, new[-1].problem_after or last.problem
        job["llm_calls"] = sum(s["llm_calls"] for s in job["steps"])
        job["cost_usd"] = sum(s["cost_usd"] for s in job["steps"])
        counted = time.monotonic() - started
        job["elapsed_s"] += counted - job.get("_counted_s", 0.0)
        job["_counted_s"] = counted
        self._spend.setdefault(job["owner"], deque()).append((time.monotonic(), sum(r.cost_usd for r in new)))
        self.counts["steps"] += len(new)
        await self._save(job)
        self._notify(job["id"])

    async def _finish(self, job: dict[str, Any], env: ResumableEnv | None, reason: str) -> None:
        if job["status"] == "cancelled":
            return
        end = env.end if env is not None else None
        if end is not None:
            job["plan"] = end.final_plan if end.success_validator else ""
            job["natural_language_plan"], job["oracle"] = end.natural_language_plan, end.success_oracle
            job["validated"] = bool(end.success_validator)
        reason = reason or outcome_error(end, job["request"]["budget"]["max_steps"])
        job["status"], job["error"] = ("failed", reason) if reason else ("succeeded", "")
        if reason:  # a plan from a job that failed its budget is not handed out
            job["plan"], job["validated"] = "", False
        if env is not None and not job.pop("_infra", False):
            job["episode_id"] = await self._store_episode(job, env)
        self.counts[job["status"]] += 1
        await self._save(job)
        self._notify(job["id"])

    async def _store_episode(self, job: dict[str, Any], env: ResumableEnv) -> str:
        """The finished job as a feedback episode, with the service's own verdicts ("" if not stored)."""
        episode = await feedback_episode(self._episode(job, env), self.settings.tasks_spec)
        try:
            assert self._episode_lock is not None
            async with self._episode_lock:
                await asyncio.to_thread(self.store.store.write_episodes, self.settings.feedback_run_id, [episode])
        except OSError as exc:
            log.warning("plan job %s: episode not stored: %s", job["id"], exc)
            return ""
        return episode.episode_id

    def _episode(self, job: dict[str, Any], env: ResumableEnv) -> EpisodeRecord:
        task = self._task_for(job["request"])
        steps = env.steps
        version = getattr(getattr(self._policy, "inner", None), "version", "")
        return EpisodeRecord(
            episode_id=f"{job['owner']}:{job['id']}", run_id=self.settings.feedback_run_id, task_id=task.task_id,
            family=task.family, domain_name=task.domain_name, policy_name="served-orchestrator",
            policy_version=version, llm_backend=self._agents().name,
            success_validator=bool(env.end and env.end.success_validator),
            success_oracle=env.end.success_oracle if env.end else None, steps=steps, seed=job["request"]["seed"],
            final_plan=job["plan"], natural_language_plan=job["natural_language_plan"],
            total_llm_calls=sum(s.llm_calls for s in steps), total_tokens_in=sum(s.tokens_in for s in steps),
            total_tokens_out=sum(s.tokens_out for s in steps), total_cost_usd=sum(s.cost_usd for s in steps),
            wall_s=job["elapsed_s"], solver_cpu_s=env.solver_cpu_s, created_at=time.time(), code_version=PLAN_CODE)

    def _agents(self) -> Any:
        if self._backend is None:
            from rollout.loop.backends import agent_backend_for

            self._backend = agent_backend_for(self.settings.llm_spec)
        return self._backend

    def _orchestrator(self) -> Any:
        """The served orchestrator: the rules layer, then the registry's model version."""
        if self._policy is None:
            from rollout.policies.rules import RulesFirst
            from serve.plan_orchestrator import RegistryModel

            s = self.settings
            self._policy = RulesFirst(RegistryModel(s.registry_name, s.registry_namespace, s.app_name,
                                                    cache_dir=s.model_cache_dir,
                                                    decision_budget_s=s.decision_budget_s))
        return self._policy

    # -- bookkeeping ------------------------------------------------------------------------------

    async def _job(self, job_id: str) -> dict[str, Any] | None:
        job = self.jobs.get(job_id)
        if job is None:
            job = await asyncio.to_thread(self.store.read_job, job_id)
            if job is not None:
                self.jobs[job_id] = job
        return job

    async def _owned(self, job_id: str, key_name: str) -> dict[str, Any] | None:
        """The job when `key_name` created it (another key's job is not found, not forbidden)."""
        if not job_id.startswith("plan-") or len(job_id) > 64:
            return None
        job = await self._job(job_id)
        return job if job is not None and job["owner"] == key_name else None

    async def _save(self, job: dict[str, Any]) -> None:
        """Write the job document; writes of one job land in the order they were asked for. The
        index of unfinished jobs names the job before its first document and drops it after its last."""
        job["updated_at"] = time.time()
        data = {k: v for k, v in job.items() if not k.startswith("_")}
        text, ended = json.dumps(data), job["status"] in TERMINAL
        async with self._locks.setdefault(job["id"], asyncio.Lock()):
            if not ended and not job.get("_indexed"):
                await asyncio.to_thread(self.store.mark_open, job["id"])
                job["_indexed"] = True
            await asyncio.to_thread(self.store.write_raw, job["id"], text)
            if ended:
                await asyncio.to_thread(self.store.mark_closed, job["id"])

    def _notify(self, job_id: str) -> None:
        changed = self._changed.pop(job_id, None)
        if changed is not None:
            changed.set()


def confine_whole_process(nice: int, cpus: tuple[int, ...], idle_class: bool = False) -> None:
    """Every thread of this process at `nice` (at least), in the idle scheduling class if asked,
    and on `cpus` (empty: unchanged). On Linux all three belong to a thread: os.nice() or
    sched_setaffinity(0, ...) in __init__ would change only the thread that runs it, while the
    actor's event loop (every job), its to_thread workers and Ray's RPC threads kept the replicas'
    priority and CPUs. Threads and processes started later inherit them from their starter."""
    for tid in (int(t) for t in os.listdir("/proc/self/task")):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            if nice > 0 and os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            if idle_class:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            if cpus:
                os.sched_setaffinity(tid, set(cpus))


async def verify_with_retry(episode: EpisodeRecord, tasks_spec: str) -> Any:
    """The service's verdicts on a finished job (serve/feedback_verify.py); a validator that fails
    to run (a busy machine) is asked again, VERIFY_RETRY.retries times, before the caller stores the
    episode unverified (VerificationUnavailable: `serve-feedback:unverified`, never trusted)."""
    from tenacity import AsyncRetrying, retry_if_exception_type

    from serve.feedback_verify import VerificationUnavailable, verify_episode

    async for attempt in AsyncRetrying(stop=VERIFY_RETRY.stop(), wait=VERIFY_RETRY.wait(), reraise=True,
                                       retry=retry_if_exception_type(VerificationUnavailable)):
        with attempt:
            return await asyncio.to_thread(verify_episode, episode, tasks_spec)
    raise AssertionError("unreachable: tenacity re-raises the last failure")


async def feedback_episode(episode: EpisodeRecord, tasks_spec: str) -> EpisodeRecord:
    """The episode with the service's verdicts, or marked `serve-feedback:unverified` (kept, never
    trusted by the loop) when the validator still cannot run after its retries."""
    from serve.feedback_verify import UNVERIFIED, VerificationUnavailable

    try:
        check = await verify_with_retry(episode, tasks_spec)
    except VerificationUnavailable as exc:
        log.warning("plan job episode %s: stored unverified: %s", episode.episode_id, exc)
        return replace(episode, code_version=UNVERIFIED)
    return replace(episode, success_validator=check.validator, success_oracle=check.oracle, code_version=check.code)


def get_runner(settings: PlanSettings, namespace: str) -> Any:
    """The application's plan runner (created on first use; a restarted service finds or makes it)."""
    return PlanRunner.options(name=runner_name(settings.app_name), namespace=namespace,  # type: ignore[attr-defined]
                              lifetime="detached", get_if_exists=True).remote(settings)

"""The /v1/plans routes' work, for the decision replica (serve/app.py declares the routes).

Each call goes to the application's plan runner (serve/plan_runner.py); the replica only maps
its answers to HTTP: 202 with the job, 409 for an Idempotency-Key reused with another body, 429
for a key over its job or spending limits, 503 when the service is full or the runner cannot
be reached, 404 for a job that does not exist or belongs to another key. Events are
server-sent events: one `step` event per committed step, `status` on each change, and a last
`end` event carrying the final job.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse, Response, StreamingResponse

from rollout.llm.budget import BudgetLimits
from serve.config import ServeConfig
from serve.plan_jobs import PlanStore
from serve.plan_reads import JobDocument, LocalJobReader, job_document, local_reader
from serve.plan_runner import JobRefused, PlanSettings, get_runner
from serve.plan_schemas import TERMINAL, PlanIn

log = logging.getLogger("halo.serve")
# How long one runner call may take before the replica answers 503 (the runner is one actor).
RUNNER_TIMEOUT_S = 30.0
# A server-sent-events stream sends a comment this often while nothing happens (proxies keep it open).
KEEPALIVE_S = 15.0
JOB_ID = re.compile(r"plan-[0-9a-f]{24}")  # serve/plan_jobs.py job_id_for, and the runner's random IDs
_REFUSALS = {"conflict": (409, "conflict"), "busy": (503, "overloaded"), "busy_key": (429, "too_many_jobs"),
             "over_spend": (429, "over_spending_limit"), "invalid": (422, "invalid_request")}


def plan_settings(config: ServeConfig) -> PlanSettings | None:
    """The runner's settings, or None when the service has no store for plan jobs."""
    store = config.plan_store or config.feedback_store
    if not store:
        return None
    return PlanSettings(store_url=store, app_name=config.app_name, llm_spec=config.plan_llm,
                        tasks_spec=config.plan_tasks, max_running=config.plan_max_running,
                        max_jobs=config.plan_max_jobs, max_jobs_per_key=config.plan_max_jobs_per_key,
                        usd_per_key_per_hour=config.plan_usd_per_key_per_hour, feedback_run_id=config.plan_run_id,
                        registry_name=config.registry_name, registry_namespace=config.registry_namespace,
                        model_cache_dir=config.model_cache_dir, decision_budget_s=config.decision_budget_s,
                        cpus=tuple(config.plan_cpus), idle_class=config.plan_idle_class,
                        llm_limits=BudgetLimits(config.plan_llm_rpm, config.plan_llm_tpm, config.plan_llm_concurrency))


def _error(status: int, kind: str, detail: str, field_name: str | None = None, retry_after: float = 0.0,
           scope_state: dict[str, Any] | None = None) -> JSONResponse:
    if scope_state is not None:
        scope_state["error_kind"] = kind
    headers = {"Retry-After": str(max(1, round(retry_after)))} if retry_after else None
    return JSONResponse({"error": kind, "field": field_name, "detail": detail}, status, headers=headers)


class PlanFrontend:
    """One replica's door to the plan runner."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.settings = plan_settings(config)
        self._runner: Any = None
        self._store: PlanStore | None = None
        self._local: LocalJobReader | None = None

    def wake(self) -> None:
        """Ask the runner to start (a fresh cluster's runner resumes unfinished jobs at once, not at
        the first plan request); fire and forget."""
        if self.settings is not None:
            self.runner().ready.remote()

    def runner(self) -> Any:
        if self._runner is None and self.settings is not None:
            self._runner = get_runner(self.settings, self.config.registry_namespace)
        return self._runner

    async def _call(self, method: str, *args: Any) -> Any:
        return await asyncio.wait_for(getattr(self.runner(), method).remote(*args), RUNNER_TIMEOUT_S)

    def _unavailable(self, state: dict[str, Any]) -> JSONResponse:
        if self.settings is None:
            return _error(503, "plans_disabled", "the service has no plan_store (or feedback_store) configured",
                          scope_state=state)
        return _error(503, "unavailable", "the plan runner did not answer; retry",
                      retry_after=self.config.retry_after_s, scope_state=state)

    async def create(self, body: PlanIn, key_name: str, idempotency_key: str | None,
                     state: dict[str, Any]) -> Response:
        if self.settings is None:
            return self._unavailable(state)
        try:
            answer = await self._call("submit", key_name, idempotency_key or "", body.model_dump())
        except Exception as exc:  # the runner did not answer: logged; the client sees a retryable 503
            log.error("request_id=%s plan runner unavailable: %r", state.get("request_id"), exc)
            return self._unavailable(state)
        if "refused" in answer:
            refused = answer["refused"]
            return self._refused(JobRefused(refused["outcome"], refused["detail"], refused["field"]), state)
        headers = {} if answer["created"] else {"Idempotent-Replayed": "true"}
        return JSONResponse({"id": answer["job"]["id"], "status": answer["job"]["status"]}, 202, headers=headers)

    def _refused(self, refused: JobRefused, state: dict[str, Any]) -> JSONResponse:
        status, kind = _REFUSALS[refused.outcome]
        retry = self.config.retry_after_s if status in (429, 503) else 0.0
        return _error(status, kind, refused.detail, refused.field_name, retry, state)

    async def get(self, job_id: str, key_name: str, state: dict[str, Any]) -> Response:
        """The job as the store holds it: the runner writes the document at every change before it
        tells anyone, so a poll reads it there, without a call to the runner (whose CPU, at nice 19,
        is the jobs'); the runner is asked only when the store cannot be read. A local store is read
        inline (serve/plan_reads.py), S3 in a worker thread."""
        if self.settings is None:
            return self._unavailable(state)
        if not JOB_ID.fullmatch(job_id):
            return _error(404, "not_found", f"no plan job {job_id[:80]!r} for this key", "id", scope_state=state)
        try:
            doc = await self._read(job_id)
        except Exception as exc:  # the store did not answer: the runner (which keeps unfinished jobs) is asked
            log.warning("request_id=%s plan store unreadable, asking the runner: %r", state.get("request_id"), exc)
            return await self._job_call("job", state, job_id, key_name)
        if doc is None or doc.owner != key_name:
            return _error(404, "not_found", f"no plan job {job_id[:80]!r} for this key", "id", scope_state=state)
        wait = doc.poll_after_s()
        return Response(doc.body, media_type="application/json",
                        headers=None if wait is None else {"Retry-After": str(wait)})

    async def _read(self, job_id: str) -> JobDocument | None:
        if self._store is None:
            self._store = PlanStore(self.settings.store_url)  # type: ignore[union-attr]
            self._local = local_reader(self._store)
        if self._local is not None:
            return self._local.read(job_id)
        job = await asyncio.to_thread(self._store.read_job, job_id)
        return None if job is None else job_document(job)

    async def cancel(self, job_id: str, key_name: str, state: dict[str, Any]) -> Response:
        return await self._job_call("cancel", state, job_id, key_name)

    async def _job_call(self, method: str, state: dict[str, Any], job_id: str, key_name: str) -> Response:
        if self.settings is None:
            return self._unavailable(state)
        try:
            view = await self._call(method, job_id, key_name)
        except Exception as exc:  # the runner did not answer: logged; the client sees a retryable 503
            log.error("request_id=%s plan runner unavailable: %r", state.get("request_id"), exc)
            return self._unavailable(state)
        if view is None:
            return _error(404, "not_found", f"no plan job {job_id[:80]!r} for this key", "id", scope_state=state)
        return JSONResponse(view)

    async def events(self, job_id: str, key_name: str, state: dict[str, Any]) -> Response:
        first = await self._job_call("job", state, job_id, key_name)
        if first.status_code != 200:
            return first
        return StreamingResponse(self._stream(job_id, key_name), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def _stream(self, job_id: str, key_name: str) -> AsyncIterator[str]:
        known, status = 0, ""
        while True:
            try:
                view = await asyncio.wait_for(self.runner().watch.remote(job_id, key_name, known, status, KEEPALIVE_S),
                                              KEEPALIVE_S + RUNNER_TIMEOUT_S)
            except Exception as exc:  # the runner went away mid-stream: say so and end the stream
                log.warning("plan events for %s ended: %r", job_id, exc)
                yield _event("error", {"error": "unavailable", "detail": "the plan runner did not answer; reconnect"})
                return
            if view is None:
                return
            for step in view["steps"][known:]:
                yield _event("step", step)
            changed = view["status"] != status or len(view["steps"]) != known
            known, status = len(view["steps"]), view["status"]
            if status in TERMINAL:
                yield _event("end", view)
                return
            yield _event("status", {"id": job_id, "status": status}) if changed else ": keep-alive\n\n"


def _event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"

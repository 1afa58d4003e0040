"""The decision service: one Ray Serve deployment with a FastAPI ingress.

The rules layer (`rollout.policies.rules.RulesFirst`) answers in the request handler without touching the
model; every other state goes to the loaded model, through one `@serve.batch` queue unless the
model decides inline. Ingress and model share the replica so a decision costs one proxy hop, not
two. The model is swapped atomically by a background thread that follows the registry actor
(serve/registry.py), so a version rollout fails no request.
"""

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import psutil
import ray
from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from ray import serve
from starlette.exceptions import HTTPException as StarletteHTTPException

from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState, StateError, field_path
from rollout.policies.rules import RulesFirst
from serve.autoscaling import FAST_IN_FLIGHT, POLICY_FUNCTION
from serve.config import ServeConfig
from serve.errors import detail_of, http_answer
from serve.fast_ingress import FAST_INGRESS_THREAD, FastIngress
from serve.guard import ActiveGuard, GuardMiddleware, GuardSettings
from serve.metrics import ReplicaMetrics, merge, render
from serve.model_source import ModelOutsideRoots, ModelSourceError
from serve.plan_api import PlanFrontend
from serve.plan_schemas import PlanCreated, PlanIn, PlanOut
from serve.registry import get_registry
from serve.runtime import LoadedModel, ModelLoadError, load_model
from serve.schemas import (
    BatchIn,
    BatchOut,
    DecisionOut,
    ErrorOut,
    FeedbackIn,
    FeedbackOut,
    ModelIn,
    ModelOut,
    StateIn,
)
from solvers.errors import HaloError
from train.cost_budget import DEADLINE
from train.manifest import ManifestError

log = logging.getLogger("halo.serve")

API_VERSION = "1"
ROUTES = ("/v1/decide", "/v1/decide/batch", "/v1/feedback", "/v1/admin/model", "/v1/admin/rollback",
          "/v1/plans", "/healthz", "/readyz", "/metrics")
# Loaded models kept per replica, so a rollback switches without reloading.
MODEL_CACHE_SIZE = 3
# The caller's name in keyless (loopback) mode: its feedback episodes are namespaced under it.
LOCAL_CALLER = "local"
# States with more text than this decide off the event loop (a planbench state is a few KB).
HEAVY_STATE_CHARS = 32_000
GIL_SWITCH_INTERVAL_S = 0.001

_ERR = {"model": ErrorOut}
# Every status a guarded route can answer (tests/serve/test_hostile.py checks them all are declared).
GUARDED_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {**_ERR, "description": "missing or wrong API key (when keys are configured)"},
    403: {**_ERR, "description": "a key without this route's role, or (keyless) a non-loopback Host/Origin"},
    408: {**_ERR, "description": "the request body did not arrive within body_timeout_s"},
    413: {**_ERR, "description": "request body over the size limit"},
    422: {**_ERR, "description": "malformed body or a bad/missing/unknown field (named in `field`)"},
    429: {**_ERR, "description": "over the key's rate limit, cost budget, feedback quota or requests in flight "
                                 "(see Retry-After)"},
    503: {**_ERR, "description": "overloaded (see Retry-After) or no model loaded"},
}
ADMIN_RESPONSES: dict[int | str, dict[str, Any]] = {
    **GUARDED_RESPONSES, 403: {**_ERR, "description": "a decision key on an admin route (admin_api_keys), or a model "
                                                       "outside the configured model_roots"}}
FEEDBACK_RESPONSES: dict[int | str, dict[str, Any]] = {
    **GUARDED_RESPONSES, 403: {**_ERR, "description": "a key without the feedback role"},
    409: {**_ERR, "description": "episode_id already stored with different content"}}
ROLLBACK_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ADMIN_RESPONSES, 409: {**_ERR, "description": "no earlier version that loaded to roll back to"}}
_PLAN_503 = {**_ERR, "description": "overloaded, too many unfinished plan jobs, the plan runner unreachable "
                                    "(see Retry-After), or no plan store configured"}
PLAN_POST_RESPONSES: dict[int | str, dict[str, Any]] = {
    **GUARDED_RESPONSES, 409: {**_ERR, "description": "this Idempotency-Key was used with a different body"},
    422: {**_ERR, "description": "a bad/missing/unknown field, or a task_id the agents cannot work on"},
    429: {**_ERR, "description": "over the key's rate limit, requests in flight, unfinished plan jobs or LLM "
                                 "spending limit (see Retry-After)"},
    503: _PLAN_503}
PLAN_JOB_RESPONSES: dict[int | str, dict[str, Any]] = {
    **GUARDED_RESPONSES, 404: {**_ERR, "description": "no such plan job for this key"}, 503: _PLAN_503}
PLAN_GET_RESPONSES: dict[int | str, dict[str, Any]] = {
    **PLAN_JOB_RESPONSES, 200: {"description": "the job", "headers": {"Retry-After": {
        "description": "while the job runs: seconds until its next step is due (when to poll again)",
        "schema": {"type": "integer", "minimum": 1}}}}}
PLAN_EVENTS_RESPONSES: dict[int | str, dict[str, Any]] = {
    **PLAN_JOB_RESPONSES, 200: {"content": {"text/event-stream": {}},
                                "description": "server-sent events: `step` per committed step, `status` on a "
                                               "change, `end` with the final job (PlanOut)"}}



class DecisionAPI(FastAPI):
    """FastAPI plus the bearer-auth security scheme in the OpenAPI document (the guard enforces it)."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema:
            return self.openapi_schema
        schema = super().openapi()
        schema.setdefault("components", {}).setdefault("securitySchemes", {})["bearerAuth"] = {
            "type": "http", "scheme": "bearer",
            "description": "required on all routes but the probes when API keys are configured"}
        # What this replica's guard enforces: no keys, no security; open paths (probes, a public
        # /metrics) need none.
        settings = ActiveGuard.settings
        open_paths = settings.open_paths if settings is not None else {"/healthz", "/readyz"}
        keys_on = settings is None or settings.keys.enabled
        for path, ops in schema.get("paths", {}).items():
            if keys_on and path not in open_paths:
                for op in ops.values():
                    op["security"] = [{"bearerAuth": []}]
        self.openapi_schema = schema
        return schema


api = DecisionAPI(title="HALO decision service", version=API_VERSION,
                  description="Orchestrator decisions for the PDDL refinement loop: rules layer + trained policy.")
api.add_middleware(GuardMiddleware)


def _field_of(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [p for p in loc if p != "body"]
    if not parts or isinstance(parts[0], int) and len(parts) == 1:
        return "body"  # JSON that does not parse (loc is the byte offset)
    return field_path(parts)


@api.exception_handler(RequestValidationError)
async def _invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
    field_name = _field_of(first.get("loc", ("body",)))
    detail = [{"field": _field_of(e.get("loc", ())), "msg": e.get("msg", "")} for e in errors[:20]]
    return JSONResponse({"error": "invalid_request", "field": field_name, "detail": detail}, status_code=422)


@api.exception_handler(StarletteHTTPException)
async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "bad_request")
    return JSONResponse({"error": kind, "field": None, "detail": str(exc.detail)}, status_code=exc.status_code,
                        headers=getattr(exc, "headers", None))


def _refuse(request: Request, status: int, kind: str, detail: str, field_name: str | None = None,
            headers: dict[str, str] | None = None) -> JSONResponse:
    """An error answer from a route; the kind is counted once, by the guard's observer."""
    request.scope.setdefault("state", {})["error_kind"] = kind
    return JSONResponse({"error": kind, "field": field_name, "detail": detail}, status, headers=headers)


@api.exception_handler(HaloError)
async def _halo_error(request: Request, exc: HaloError) -> JSONResponse:
    """An error of the one hierarchy that a route let through: its status by its cause (serve/errors.py)."""
    status, kind = http_answer(exc)
    if status >= 500:
        log.error("request_id=%s %s: %s", request.scope.get("state", {}).get("request_id"), type(exc).__name__, exc)
    headers = {"Retry-After": "1"} if status == 503 else None
    return _refuse(request, status, kind, detail_of(exc), headers=headers)


@api.exception_handler(StateError)
async def _invalid_state(_request: Request, exc: StateError) -> JSONResponse:
    return JSONResponse({"error": "invalid_request", "field": exc.field_name,
                         "detail": [{"field": exc.field_name, "msg": str(exc)}]}, status_code=422)


def _route_label(path: str) -> str:
    if path.startswith("/v1/plans/"):  # one label for every job's routes (bounded metric labels)
        return "/v1/plans/{id}/events" if path.endswith("/events") else "/v1/plans/{id}"
    return path if path in ROUTES else "other"


def _error_kind(status: int) -> str | None:
    return {401: "unauthorized", 403: "forbidden", 408: "timeout", 413: "too_large", 422: "invalid_request",
            400: "bad_request", 404: "not_found", 405: "method_not_allowed", 409: "conflict", 429: "rate_limited",
            499: "client_disconnect", 503: "unavailable"}.get(status, "internal" if status >= 500 else None)


@contextmanager
def decision_budget(seconds: float) -> Iterator[None]:
    """The time feature work of this request may take (train/cost_budget.py), set on its context
    variable directly: no call into train on the hot path."""
    token = DEADLINE.set(min(DEADLINE.get(), time.perf_counter() + seconds))
    try:
        yield
    finally:
        DEADLINE.reset(token)


def state_chars(state: EpisodeState) -> int:
    return (len(state.domain) + len(state.problem) + len(state.task_description) + len(state.plan)
            + len(state.validator_errors) + len(state.planner_log))


class _ServedModel(Policy):
    """The replica's current model as the policy the rules layer defers to."""

    name = "served-model"

    def __init__(self, current: Callable[[], LoadedModel | None],
                 batched: Callable[[EpisodeState], Awaitable[Decision]],
                 fast_batched: Callable[[EpisodeState], Awaitable[Decision]]) -> None:
        self._current = current
        self._batched = batched
        self._fast_batched = fast_batched

    def _decide(self, state: EpisodeState) -> Decision:  # the service decides through adecide only
        model = self._current()
        assert model is not None
        return model.decide_batch([state])[0]

    async def adecide(self, state: EpisodeState) -> Decision:
        model = self._current()
        # An inline policy decides in tens of microseconds: batching would only add the batch
        # window's wait (the whole of its p50 at concurrency 1), so it decides right here, unless the
        # state is large enough that reading it (parsing, reachability) may take a while: that
        # one decides in a worker thread, off the event loop, under the request's time budget.
        if model is not None and model.inline:
            if state_chars(state) > HEAVY_STATE_CHARS:
                return (await asyncio.to_thread(model.decide_batch, [state]))[0]
            return model.decide_batch([state])[0]
        # A @serve.batch queue belongs to the event loop that first used it: the fast ingress's
        # thread has its own loop, so it batches through its own queue.
        if threading.current_thread().name == FAST_INGRESS_THREAD:
            return await self._fast_batched(state)
        return await self._batched(state)


@serve.deployment(name="DecisionService")
@serve.ingress(api)
class DecisionService:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = ServeConfig.from_dict(config)
        ctx = serve.get_replica_context()
        self.replica_id = ctx.replica_id.unique_id
        self.metrics = ReplicaMetrics()
        c = self.config
        keys = c.key_ring()
        keys.on_problem = lambda problem: self.metrics.inc("halo_serve_key_file_problems", (problem,))
        self.guard = GuardSettings(keys, c.max_body_bytes, c.metrics_public, observe=self._observe,
                                   body_timeout_s=c.body_timeout_s, max_inflight_per_client=c.max_inflight_per_client,
                                   max_uploads_per_address=c.max_uploads_per_address,
                                   rate_limit_rps=c.rate_limit_rps, rate_limit_burst=c.rate_limit_burst,
                                   cost_limit_s_per_s=c.cost_limit_s_per_s, cost_limit_burst_s=c.cost_limit_burst_s,
                                   bind_host=c.host)
        self._registry = get_registry(self.config.registry_name, self.config.registry_namespace)
        self._model_roots = self.config.model_source_roots()  # where admin may deploy from
        self._lock = threading.Lock()  # serialises model loads (admin request vs sync thread)
        self._cache: dict[tuple[str, str], LoadedModel] = {}
        self._model: LoadedModel | None = None
        self._revision = 0
        # (revision, error, deploy revision) of a target that would not load or failed its probe
        self._failed: tuple[int, str, int] | None = None
        self._direct_port = 0
        self._feedback_writer: Any = None
        self._plans = PlanFrontend(self.config)
        for batched in (self._batched, self._fast_batched):
            batched.set_max_batch_size(self.config.max_batch_size)
            batched.set_batch_wait_timeout_s(self.config.batch_wait_timeout_s)
        self._policy = RulesFirst(_ServedModel(lambda: self._model, self._batched, self._fast_batched))
        target = ray.get(self._registry.target.remote())
        if target is None:
            raise RuntimeError("the model registry has no model; deploy one before starting replicas")
        self._apply_target(target)
        if self._model is None:
            raise RuntimeError(f"replica could not load the served model: {self._failed}")
        ActiveGuard.settings = self.guard
        # Large states decide in a worker thread; a 1 ms GIL switch interval (Python's default
        # is 5 ms) keeps the event loop's wait behind that thread short for everyone else's requests.
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        self._fast: FastIngress | None = None
        if c.fast_ingress:
            self._fast = FastIngress(api, host=c.host, port_range=(c.fast_ingress_min_port, c.fast_ingress_max_port),
                                     max_in_flight=c.fast_ingress_max_in_flight, retry_after_s=c.retry_after_s,
                                     timeout_keep_alive_s=c.keep_alive_timeout_s, route_prefix=c.route_prefix,
                                     on_shed=lambda path: self._observe(path, 503, 0.0, "overloaded"),
                                     header_timeout_s=c.header_timeout_s, shared_port=c.fast_port)
        self._stop = threading.Event()
        self._sync_thread = threading.Thread(target=self._sync_loop, name="halo-model-sync", daemon=True)
        self._sync_thread.start()
        self._plans.wake()

    # -- model versions ---------------------------------------------------------------------------

    def _apply_target(self, target: dict[str, Any], preloaded: LoadedModel | None = None) -> None:
        with self._lock:
            if target["revision"] == self._revision:
                return
            key = (target["ref"], target["version"])
            model = preloaded or self._cache.get(key)
            if model is None:
                try:
                    model = load_model(target["ref"], runtime=self.config.runtime,
                                       cache_dir=self.config.model_cache_dir or None, vllm_options=self.config.vllm,
                                       limits=self.config.size_limits())
                except Exception as exc:  # keep serving the old model; report the failure
                    self._failed = (target["revision"], f"{type(exc).__name__}: {exc}",
                                    target.get("deployed_revision", 0))
                    self._revision = target["revision"]
                    self.metrics.inc("halo_serve_errors", ("model_load_failed",))
                    log.error("replica %s: cannot load %s: %s", self.replica_id, target["ref"], exc)
                    return
                if model.version != target["version"]:
                    self._failed = (target["revision"], f"{target['ref']} now holds version {model.version}, "
                                                        f"not {target['version']}", target.get("deployed_revision", 0))
                    self._revision = target["revision"]
                    return
            self._cache.pop(key, None)
            self._cache[key] = model  # most recently used last
            while len(self._cache) > MODEL_CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))
            self._model = model  # the swap: requests already running keep their reference
            self._revision = target["revision"]
            self._failed = None

    def _status(self) -> dict[str, Any]:
        model = self._model
        return {"revision": self._revision, "name": model.name if model else "",
                "version": model.version if model else "", "load_error": self._failed[1] if self._failed else "",
                "failed_revision": self._failed[2] if self._failed else 0, "direct_port": self._find_direct_port()}

    def _find_direct_port(self) -> int:
        """The port of this replica's own HTTP server: the fast ingress, else Serve's direct
        ingress (0 when both are off)."""
        if self._fast is not None:
            return self._fast.port
        if not self._direct_port and os.environ.get("RAY_SERVE_ENABLE_DIRECT_INGRESS") == "1":
            lo = int(os.environ.get("RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT", "30000"))
            hi = int(os.environ.get("RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT", "31000"))
            for conn in psutil.Process().net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN and lo <= conn.laddr.port <= hi:
                    self._direct_port = conn.laddr.port
                    break
        return self._direct_port

    def _sync_loop(self) -> None:
        while not self._stop.wait(self.config.sync_interval_s):
            try:
                target = ray.get(self._registry.sync.remote(self.replica_id, self._status(), self.metrics.snapshot()),
                                 timeout=30)
                if target is not None and target["revision"] != self._revision:
                    self._apply_target(target)
            except Exception as exc:  # the registry restarting must not kill the replica
                log.warning("replica %s: model sync failed: %s", self.replica_id, exc)

    def record_autoscaling_stats(self) -> dict[str, float]:
        """Called by Serve for its autoscaler: the requests Serve does not route itself."""
        return {FAST_IN_FLIGHT: float(self._fast.in_flight if self._fast is not None else 0)}

    def check_health(self) -> None:
        if self._model is None:
            raise RuntimeError("no model loaded")
        if not self._sync_thread.is_alive():
            raise RuntimeError("model sync thread stopped")
        if self._fast is not None and not self._fast.alive:
            raise RuntimeError("fast ingress server stopped")

    def __del__(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        fast = getattr(self, "_fast", None)
        if fast is not None:
            fast.stop()

    # -- metrics ----------------------------------------------------------------------------------

    def _observe(self, path: str, status: int, seconds: float, kind: str | None = None) -> None:
        route = _route_label(path)
        self.metrics.inc("halo_serve_requests", (route, str(status)))
        self.metrics.observe("halo_serve_request_latency_seconds", seconds, (route,))
        kind = kind or _error_kind(status)
        if kind is not None:
            self.metrics.inc("halo_serve_errors", (kind,))

    def _count(self, answer: dict[str, Any], latency_ms: float) -> None:
        by = answer["decided_by"]
        self.metrics.inc("halo_serve_decisions", (str(answer["agent_id"]), answer["agent_name"], by))
        self.metrics.observe("halo_serve_decision_latency_seconds", latency_ms / 1000.0, (by,))

    # -- decisions --------------------------------------------------------------------------------

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.001)
    async def _batched(self, states: list[EpisodeState]) -> list[Decision]:
        return await self._decide_states(states)

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.001)
    async def _fast_batched(self, states: list[EpisodeState]) -> list[Decision]:
        return await self._decide_states(states)

    async def _decide_states(self, states: list[EpisodeState]) -> list[Decision]:
        model = self._model
        assert model is not None
        self.metrics.observe("halo_serve_model_batch_size", float(len(states)))
        if model.inline:
            return model.decide_batch(states)
        return await asyncio.to_thread(model.decide_batch, states)

    async def _decide(self, state: EpisodeState, request: Request | None = None) -> dict[str, Any]:
        """The decision as the API answers it (`Decision.to_dict()`), counted in the metrics; its
        time is charged to the caller's cost budget (serve/guard.py)."""
        t0 = time.perf_counter()
        with decision_budget(self.config.decision_budget_s):
            d = await self._policy.adecide(state)
        seconds = time.perf_counter() - t0
        model = self._model
        # An inline policy's time is the replica's CPU the request took; a batched (LLM) policy's
        # is mostly its queue's and the model's, bounded by the batch queue, not charged.
        if request is not None and (model is None or model.inline):
            scope_state = request.scope.setdefault("state", {})
            scope_state["work_s"] = scope_state.get("work_s", 0.0) + seconds
        latency_ms = seconds * 1000.0
        # A rule decision carries the version the replica serves, as the model's own decisions do.
        version = d.policy_version or (model.version if model else "")
        answer = replace(d, latency_ms=round(latency_ms, 3), policy_version=version).to_dict()
        self._count(answer, latency_ms)
        return answer

    @api.post("/v1/decide", response_model=DecisionOut, responses=GUARDED_RESPONSES,
              summary="Choose the next agent for one episode state")
    async def decide(self, body: StateIn, request: Request) -> Any:  # type: ignore[valid-type]
        return await self._decide(EpisodeState.from_model(body), request)

    @api.post("/v1/decide/batch", response_model=BatchOut, responses=GUARDED_RESPONSES,
              summary="Choose the next agent for many states at once")
    async def decide_batch(self, body: BatchIn, request: Request) -> Any:
        if len(body.states) > self.config.max_batch_states:
            return _refuse(request, 422, "invalid_request",
                           f"at most {self.config.max_batch_states} states per request", "states")
        # One budget for the whole batch (twice one state's): a batch of crafted states costs what
        # two do; its later states decide on the neutral features.
        with decision_budget(2 * self.config.decision_budget_s):
            decisions = await asyncio.gather(*(self._decide(EpisodeState.from_model(s), request)
                                               for s in body.states))
        model = self._model
        return {"decisions": decisions, "policy_version": model.version if model else ""}

    async def decide_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The same decision for DeploymentHandle callers (serve/handle_policy.py); raises StateError."""
        return await self._decide(EpisodeState.from_dict(state))

    # -- feedback ---------------------------------------------------------------------------------

    @api.post("/v1/feedback", response_model=FeedbackOut, responses=FEEDBACK_RESPONSES,
              summary="Store the outcome of an episode that used the service (idempotent by episode_id per key; "
                      "re-verified before it is trusted)")
    async def feedback(self, body: FeedbackIn, request: Request) -> Any:
        if not self.config.feedback_store:
            return _refuse(request, 503, "feedback_disabled", "the service has no feedback_store configured")
        from serve.feedback import episode_from_feedback

        state = request.scope["state"]
        key_name = state.get("key_name") or LOCAL_CALLER
        model = self._model
        episode = episode_from_feedback(body, self.config.feedback_run_id, model.version if model else "", key_name)
        try:
            answer = await self._writer().submit.remote(key_name, state.get("body_bytes", 0), episode)
        except Exception as exc:
            self.metrics.inc("halo_serve_feedback_episodes", ("error",))
            log.error("request_id=%s feedback %s not stored: %s", state.get("request_id"), episode.episode_id,
                      type(exc).__name__)
            # The cause stays in the service log: a client sees a transient, retryable answer.
            return _refuse(request, 503, "store_unavailable", "the trajectory store did not take the episode; retry",
                           headers={"Retry-After": str(max(1, round(self.config.retry_after_s)))})
        outcome = answer["outcome"]
        self.metrics.inc("halo_serve_feedback_episodes", (answer.get("verdict", outcome).split(":")[-1],))
        if outcome == "over_quota":
            return _refuse(request, 429, "over_quota", f"key {key_name} is over its feedback quota "
                           f"({self.config.feedback_episodes_per_hour} episodes, {self.config.feedback_bytes_per_hour} "
                           "bytes per hour)", headers={"Retry-After": str(max(1, round(answer["retry_after"])))})
        if outcome == "conflict":
            return _refuse(request, 409, "conflict", f"episode {body.episode_id} is already stored with different "
                                                     "content (episode IDs are idempotency keys)", "episode_id")
        return {"episode_id": body.episode_id, "stored": outcome == "stored", "steps": episode.num_steps,
                "stored_id": episode.episode_id, "verdict": answer.get("verdict", "")}

    def _writer(self) -> Any:
        from serve.feedback import FeedbackSettings, get_writer

        if self._feedback_writer is None:
            c = self.config
            settings = FeedbackSettings(c.feedback_store, c.feedback_run_id, c.feedback_tasks,
                                        c.feedback_episodes_per_hour, c.feedback_bytes_per_hour,
                                        c.feedback_batch_size, c.feedback_batch_wait_s)
            self._feedback_writer = get_writer(settings, c.registry_namespace)
        return self._feedback_writer

    # -- plans ------------------------------------------------------------------------------------

    @api.post("/v1/plans", response_model=PlanCreated, status_code=202, responses=PLAN_POST_RESPONSES,
              summary="Start a plan job: the refinement loop on the service's cluster (idempotent per "
                      "Idempotency-Key and body)")
    async def create_plan(self, body: PlanIn, request: Request,
                          idempotency_key: str | None = Header(None, min_length=1, max_length=200)) -> Any:
        state = request.scope["state"]
        return await self._plans.create(body, state.get("key_name") or LOCAL_CALLER, idempotency_key, state)

    @api.get("/v1/plans/{job_id}", response_model=PlanOut, responses=PLAN_GET_RESPONSES,
             summary="A plan job: status, steps so far, and the validated plan once it succeeded")
    async def get_plan(self, job_id: str, request: Request) -> Any:
        state = request.scope["state"]
        return await self._plans.get(job_id, state.get("key_name") or LOCAL_CALLER, state)

    @api.get("/v1/plans/{job_id}/events", response_class=Response, responses=PLAN_EVENTS_RESPONSES,
             summary="A plan job's steps as server-sent events, ending with its final state")
    async def plan_events(self, job_id: str, request: Request) -> Any:
        state = request.scope["state"]
        return await self._plans.events(job_id, state.get("key_name") or LOCAL_CALLER, state)

    @api.delete("/v1/plans/{job_id}", response_model=PlanOut, responses=PLAN_JOB_RESPONSES,
                summary="Cancel a plan job (a finished job is returned unchanged)")
    async def cancel_plan(self, job_id: str, request: Request) -> Any:
        state = request.scope["state"]
        return await self._plans.cancel(job_id, state.get("key_name") or LOCAL_CALLER, state)

    # -- model admin ------------------------------------------------------------------------------

    async def _model_status(self) -> dict[str, Any]:
        return await self._registry.status.remote()

    @api.get("/v1/admin/model", response_model=ModelOut, responses=ADMIN_RESPONSES,
             summary="The target model version and what each replica serves")
    async def get_model(self) -> Any:
        return await self._model_status()

    @api.post("/v1/admin/model", response_model=ModelOut, responses=ADMIN_RESPONSES,
              summary="Roll out a new model version to all replicas (refused unless its manifest verifies)")
    async def set_model(self, body: ModelIn, request: Request) -> Any:
        try:
            model = await asyncio.to_thread(load_model, body.model, runtime=self.config.runtime,
                                            cache_dir=self.config.model_cache_dir or None,
                                            vllm_options=self.config.vllm, roots=self._model_roots,
                                            limits=self.config.size_limits())
        except ModelOutsideRoots as exc:
            return _refuse(request, 403, "model_outside_roots", str(exc), "model")
        except ManifestError as exc:
            return _refuse(request, 422, "manifest_invalid", str(exc), "model")
        except (ModelSourceError, ModelLoadError) as exc:
            return _refuse(request, 422, "model_load_failed", str(exc), "model")
        except Exception as exc:  # a store error (e.g. botocore): its text stays in the log
            log.error("request_id=%s model %r not loaded: %r", request.scope["state"].get("request_id"), body.model,
                      exc)
            return _refuse(request, 422, "model_load_failed", f"the model could not be fetched ({type(exc).__name__})",
                           "model")
        target = await self._registry.deploy.remote(body.model, model.describe())
        await asyncio.to_thread(self._apply_target, target, model)
        return await self._model_status()

    @api.post("/v1/admin/rollback", response_model=ModelOut, responses=ROLLBACK_RESPONSES,
              summary="Go back to the previously deployed model version")
    async def rollback(self, request: Request) -> Any:
        # The registry answers None (not an exception) when there is nothing to go back to, so no
        # actor traceback can reach the client.
        target = await self._registry.rollback.remote()
        if target is None:
            return _refuse(request, 409, "conflict", "no earlier version that loaded to roll back to")
        await asyncio.to_thread(self._apply_target, target)
        return await self._model_status()

    # -- health -----------------------------------------------------------------------------------

    @api.get("/healthz", summary="Liveness: the replica answers")
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}

    @api.get("/readyz", summary="Readiness: a verified model is loaded (and which version)",
             responses={503: {**_ERR, "description": "no model loaded"}})
    async def readyz(self) -> Any:
        model = self._model
        if model is None:
            return JSONResponse({"error": "not_ready", "detail": self._failed[1] if self._failed else "loading"}, 503)
        body = {"ready": True, **model.describe(), "label_map_verified": True, "revision": self._revision,
                "replica": self.replica_id}
        if self._failed:
            body["last_load_error"] = self._failed[1]
        if self.guard.keys.key_file:
            body["key_file"] = self.guard.keys.status()
        return body

    @api.get("/metrics", summary="Prometheus metrics summed over all replicas",
             response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    async def metrics_text(self) -> Response:
        try:
            snapshots, info = await asyncio.wait_for(self._registry.metrics.remote(), timeout=5)
        except Exception:  # registry unreachable: show this replica alone rather than nothing (counted)
            self.metrics.inc("halo_serve_errors", ("metrics_registry_unreachable",))
            snapshots, info = {}, {}
        snapshots = {**snapshots, self.replica_id: self.metrics.snapshot()}
        info = {**info, self.replica_id: {"name": self._model.name if self._model else "",
                                          "version": self._model.version if self._model else ""}}
        return Response(render(merge(snapshots.values()), info), media_type="text/plain; version=0.0.4")


def build_app(config: ServeConfig) -> Any:
    """The Serve application for `config` (the registry must already hold the model to serve)."""
    options: dict[str, Any] = {
        "max_ongoing_requests": config.max_ongoing_requests,
        "max_queued_requests": config.max_queued_requests,
        "backpressure_config": {"status_code": 503, "retry_after_s": config.retry_after_s},
        "ray_actor_options": {"num_cpus": config.replica_num_cpus, "num_gpus": config.replica_num_gpus},
        "health_check_period_s": 2.0,
        "health_check_timeout_s": 30.0,
    }
    if config.autoscaling_config:
        options["autoscaling_config"] = dict(config.autoscaling_config)
        if config.fast_ingress:  # Serve's default policy would not see the fast ingress's requests
            options["autoscaling_config"].setdefault("policy", {"policy_function": POLICY_FUNCTION})
    else:
        options["num_replicas"] = config.num_replicas
    return DecisionService.options(**options).bind(config.to_dict())

"""Settings of the decision service: where it listens, what it serves, how it scales and guards.

Loaded from a YAML file (`halo serve --config serve.yaml`) with command-line overrides; every key
is optional. Unknown keys are refused so a typo does not silently keep a default.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from serve.keys import KeyConfigError, KeyRing, merge_tables, parse_keys
from serve.model_source import ModelRoots, ModelSourceError, SizeLimits
from solvers.errors import InputError

API_KEYS_ENV = "HALO_SERVE_API_KEYS"
ADMIN_KEYS_ENV = "HALO_SERVE_ADMIN_KEYS"
FEEDBACK_KEYS_ENV = "HALO_SERVE_FEEDBACK_KEYS"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

# Ray Serve settings read when Ray's processes start, so they are set before a local Ray starts (an
# existing value wins) and belong in the environment of a cluster's pods (k8s ConfigMap halo-config).
# - Direct ingress: each ingress replica runs its own HTTP server (uvicorn on the replica's event
#   loop) on a port from RAY_SERVE_DIRECT_INGRESS_{MIN,MAX}_HTTP_PORT, so a decision skips the
#   proxy actor and its extra hop (benchmarks/serve.py; docs/results/2026-12-03-serve-latency.md).
#   The proxy keeps serving on `port` for compatibility.
# - User code and the router on the main event loops: one cross-thread hop less per request;
#   safe because this service never blocks its loop (slow runtimes decide in a worker thread).
# - Ray's workers at nice 0, not Ray's default 15: the decision replicas are Ray workers, and the
#   plan runner's nice 19 (serve/plan_runner.py) puts it below them only if they are not at 15 too.
SERVE_LATENCY_ENV = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
                     "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1", "RAY_worker_niceness": "0"}


def apply_serve_latency_env() -> None:
    for name, value in SERVE_LATENCY_ENV.items():
        os.environ.setdefault(name, value)


class ConfigError(InputError, ValueError):
    pass


def _parent(ref: str) -> str:
    """The directory or prefix that holds a model reference."""
    if "://" in ref:
        return ref.rstrip("/").rsplit("/", 1)[0]
    return str(Path(ref).expanduser().resolve().parent)


@dataclass
class ServeConfig:
    model: str = ""  # model directory or store URL (file://, s3://) holding manifest.json
    host: str = "127.0.0.1"
    port: int = 8000
    app_name: str = "halo-decide"
    route_prefix: str = "/"
    # "auto": vLLM when the manifest is an LLM policy and a GPU + vllm are present, else CPU.
    runtime: str = "auto"
    # Replicas: a fixed count, or an autoscaling_config (min_replicas, max_replicas,
    # target_ongoing_requests, ...) which then takes precedence.
    num_replicas: int = 1
    autoscaling_config: dict[str, Any] | None = None
    replica_num_cpus: float = 1.0
    replica_num_gpus: float = 0.0
    # Bounded queues: past max_ongoing_requests per replica plus max_queued_requests waiting in
    # the router, requests get 503 with Retry-After.
    max_ongoing_requests: int = 32
    max_queued_requests: int = 256
    retry_after_s: float = 1.0
    # Dynamic batching of model decisions (@serve.batch).
    max_batch_size: int = 16
    batch_wait_timeout_s: float = 0.001
    # Safety. Keys are `KEY` or `NAME=KEY` (the name, never the key, shows in metrics and logs),
    # at least 16 characters. Decision keys call /v1/decide; feedback keys /v1/feedback; admin
    # keys every route. A key listed in several roles holds each. api_keys_file (`decision
    # NAME=KEY` / `feedback NAME=KEY` / `admin NAME=KEY` lines) is re-read when it changes:
    # rotation without a restart; it fails closed (serve/keys.py).
    api_keys: list[str] = field(default_factory=list)
    feedback_api_keys: list[str] = field(default_factory=list)
    admin_api_keys: list[str] = field(default_factory=list)
    api_keys_file: str = ""
    # Without any key on a non-loopback host the service refuses to start unless this is set.
    insecure: bool = False
    rate_limit_rps: float = 0.0  # per key; 0 = unlimited; past it 429 + Retry-After
    rate_limit_burst: float = 0.0  # bucket size (default: one second's worth)
    # Seconds of decision work (features, model, body parsing) beyond the first 2 ms of each
    # request that one key (keyless: one address) may cause per second on a replica, and its
    # burst; past it 429 + Retry-After, so one heavy client cannot take a replica. 0 = off.
    cost_limit_s_per_s: float = 0.1
    cost_limit_burst_s: float = 0.5
    # Time for reading one state's PDDL and texts (features, reachability) in one decision; past
    # it the policy decides on the neutral features it has (train/cost_budget.py).
    decision_budget_s: float = 0.08
    # HTTP limits: the body must arrive within body_timeout_s (else 408); idle keep-alive
    # connections close after keep_alive_timeout_s; one client (key, else address) has at most
    # max_inflight_per_client requests in flight (else 429), so stalled clients stall only themselves.
    body_timeout_s: float = 10.0
    header_timeout_s: float = 10.0  # the fast ingress closes a connection whose headers do not arrive in time
    keep_alive_timeout_s: float = 5.0
    max_inflight_per_client: int = 16
    # Bodies one address may be sending at once (stalled uploads are bounded by this and
    # body_timeout_s; they do not count against their key's max_inflight_per_client).
    max_uploads_per_address: int = 1024
    max_body_bytes: int = 1_048_576
    max_batch_states: int = 256
    metrics_public: bool = True
    # Feedback: trajectory store URL (local dir, file://, s3://); empty disables /v1/feedback.
    feedback_store: str = ""
    feedback_run_id: str = "serve-feedback"
    # Each episode is re-verified before it is trusted (serve/feedback_verify.py): the validator on
    # its final PDDL and plan, the oracle when its task_id is one of feedback_tasks. Per key and
    # hour at most feedback_episodes_per_hour episodes and feedback_bytes_per_hour bytes.
    feedback_tasks: str = "bundled"
    feedback_episodes_per_hour: int = 600
    feedback_bytes_per_hour: int = 50_000_000
    # Episodes gathered into one store commit (or whatever arrived within feedback_batch_wait_s).
    feedback_batch_size: int = 64
    feedback_batch_wait_s: float = 0.5
    # Plan jobs (/v1/plans, serve/plan_runner.py): their store (empty: feedback_store; neither:
    # /v1/plans answers 503), the agents' backend (sim[:...] needs a known task_id, or
    # openai:MODEL@URL), the tasks a task_id may name, and the limits: jobs running at once,
    # unfinished jobs in all (503 beyond) and per key (429 beyond), LLM spend per key and hour.
    plan_store: str = ""
    plan_llm: str = "sim"
    plan_tasks: str = "bundled"
    plan_max_running: int = 32
    plan_max_jobs: int = 256
    plan_max_jobs_per_key: int = 64
    plan_usd_per_key_per_hour: float = 20.0
    plan_run_id: str = "serve-plans"
    # CPUs the plan runner and its solver processes may use (empty: any); on a node that also hosts
    # decision replicas, keeping them off the replicas' CPUs keeps /v1/decide's tail.
    plan_cpus: list[int] = field(default_factory=list)
    # The runner and its solvers in the kernel's idle scheduling class (SCHED_IDLE) as well as at
    # nice 19: they run only on CPU time the replicas leave. Off: nice 19 alone (a node shared with
    # other busy work, where idle-class plan jobs could wait indefinitely).
    plan_idle_class: bool = True
    # The plan jobs' LLM budget, for all jobs together (serve/plan_budget.py: the job-wide rate
    # coordinator rollout workers use): requests/min, tokens/min, calls in flight; None: no limit.
    plan_llm_rpm: float | None = None
    plan_llm_tpm: float | None = None
    plan_llm_concurrency: int | None = None
    # How often replicas look for a new model version and report their metrics.
    sync_interval_s: float = 0.5
    registry_name: str = "halo-model-registry"
    registry_namespace: str = "halo"
    model_cache_dir: str = ""
    # Where admin may deploy models from (local directories, file:// or s3:// prefixes); empty:
    # the directory or prefix of `model` (and of feedback_store's models/). Nothing outside them.
    model_roots: list[str] = field(default_factory=list)
    max_model_bytes: int = 2_000_000_000  # per artifact file, and for the whole model
    max_npz_inflated_bytes: int = 512_000_000  # what a weights.npz may decompress to
    # Serve's own logging. Per-request access logs are a large share of a fast decision's time
    # (docs/results/2026-12-03-code-figures.md); /metrics already counts every request.
    access_log: bool = False
    # The fast tier's ingress (serve/fast_ingress.py): each replica also answers the same routes
    # on its own uvicorn server, on a port of [fast_ingress_min_port, fast_ingress_max_port],
    # without Serve's per-request machinery. Its port is what `direct_urls()` and the k8s Service
    # halo-decide-direct point at; at most fast_ingress_max_in_flight requests at once (503 above).
    fast_ingress: bool = True
    # The one URL: when set, every replica's fast ingress listens on this port of `host`
    # (SO_REUSEPORT: replicas on one machine share it, the kernel spreads connections, no proxy
    # hop); `halo serve --port` sets it and moves Serve's proxy to `port` = --proxy-port. 0: each
    # replica takes a port of fast_ingress_min_port..fast_ingress_max_port.
    fast_port: int = 0
    fast_ingress_min_port: int = 33000
    fast_ingress_max_port: int = 33999
    fast_ingress_max_in_flight: int = 512
    log_level: str = "WARNING"
    # vLLM engine options (GPU runtime only).
    vllm: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> ServeConfig:
        if not 0 < self.port < 65536:
            raise ConfigError(f"port: {self.port} is not a TCP port")
        if self.runtime not in {"auto", "cpu", "vllm"}:
            raise ConfigError(f"runtime: {self.runtime!r} (want auto, cpu or vllm)")
        for name in ("num_replicas", "max_ongoing_requests", "max_batch_size", "max_body_bytes",
                     "max_batch_states"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: must be at least 1")
        if self.max_queued_requests < -1:
            raise ConfigError("max_queued_requests: -1 (unbounded) or a non-negative count")
        if self.decision_budget_s <= 0:
            raise ConfigError("decision_budget_s must be positive")
        if self.batch_wait_timeout_s < 0 or self.sync_interval_s <= 0:
            raise ConfigError("batch_wait_timeout_s and sync_interval_s must be positive")
        if self.log_level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ConfigError(f"log_level: {self.log_level!r} (want DEBUG, INFO, WARNING, ERROR or CRITICAL)")
        for name in ("api_keys", "feedback_api_keys", "admin_api_keys", "model_roots"):
            if not isinstance(getattr(self, name), list) or any(not isinstance(k, str) for k in getattr(self, name)):
                raise ConfigError(f"{name}: a list of strings")
        if min(self.body_timeout_s, self.header_timeout_s, self.keep_alive_timeout_s) <= 0 \
                or min(self.max_inflight_per_client, self.max_uploads_per_address) < 1:
            raise ConfigError("body_timeout_s, header_timeout_s, keep_alive_timeout_s and max_inflight_per_client "
                              "must be positive")
        if not 0 < self.fast_ingress_min_port <= self.fast_ingress_max_port < 65536:
            raise ConfigError("fast_ingress_min_port..fast_ingress_max_port: a range of TCP ports")
        if not 0 <= self.fast_port < 65536 or self.fast_port and self.fast_port == self.port:
            raise ConfigError("fast_port: a TCP port other than `port` (Serve's proxy), or 0")
        if self.fast_ingress_max_in_flight < 1:
            raise ConfigError("fast_ingress_max_in_flight: must be at least 1")
        if min(self.rate_limit_rps, self.rate_limit_burst, self.cost_limit_s_per_s, self.cost_limit_burst_s) < 0:
            raise ConfigError("rate_limit_rps, rate_limit_burst and the cost limits must not be negative")
        if min(self.feedback_episodes_per_hour, self.feedback_bytes_per_hour, self.feedback_batch_size) < 1 \
                or self.feedback_batch_wait_s < 0:
            raise ConfigError("feedback quotas and feedback_batch_size must be positive")
        self._validate_plans()
        if self.max_model_bytes < 1 or self.max_npz_inflated_bytes < 1:
            raise ConfigError("max_model_bytes and max_npz_inflated_bytes must be positive")
        self.key_ring()  # refuses short keys from every source
        self.model_source_roots()
        return self

    def _validate_plans(self) -> None:
        if min(self.plan_max_running, self.plan_max_jobs, self.plan_max_jobs_per_key) < 1:
            raise ConfigError("plan_max_running, plan_max_jobs and plan_max_jobs_per_key must be at least 1")
        if not isinstance(self.plan_cpus, list) or any(not isinstance(c, int) or c < 0 for c in self.plan_cpus):
            raise ConfigError("plan_cpus: a list of CPU numbers")
        if self.plan_usd_per_key_per_hour < 0:
            raise ConfigError("plan_usd_per_key_per_hour must not be negative (0: no limit)")
        for name in ("plan_llm_rpm", "plan_llm_tpm", "plan_llm_concurrency"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise ConfigError(f"{name}: a positive number, or leave it out (no limit); got {value!r}")
        from rollout.llm.spec import LLMSpec
        from rollout.sim.spec import parse_sim_spec

        try:
            if LLMSpec.parse(self.plan_llm).is_sim:
                parse_sim_spec(self.plan_llm)
        except ValueError as exc:  # SpecError is a ValueError
            raise ConfigError(f"plan_llm: {exc}") from None

    def key_ring(self) -> KeyRing:
        """Decision, feedback and admin keys (config + comma-separated HALO_SERVE_API_KEYS,
        HALO_SERVE_FEEDBACK_KEYS, HALO_SERVE_ADMIN_KEYS) and the key file; raises ConfigError
        for a key under 16 characters or a bad key name."""
        sources = (("decision", "api_keys", API_KEYS_ENV), ("feedback", "feedback_api_keys", FEEDBACK_KEYS_ENV),
                   ("admin", "admin_api_keys", ADMIN_KEYS_ENV))
        try:
            tables = [parse_keys([*getattr(self, name), *os.environ.get(env, "").split(",")], f"{name} / {env}", role)
                      for role, name, env in sources]
            return KeyRing(merge_tables(*tables), self.api_keys_file)
        except (OSError, KeyConfigError) as exc:
            raise ConfigError(str(exc)) from exc

    def model_source_roots(self) -> ModelRoots:
        """model_roots, else the directory or prefix holding `model` and the feedback store's models/."""
        roots = list(self.model_roots)
        if not roots:
            roots = [_parent(self.model)] if self.model else []
            if self.feedback_store:
                roots.append(self.feedback_store.rstrip("/") + "/models")
        try:
            return ModelRoots.parse(roots)
        except ModelSourceError as exc:
            raise ConfigError(str(exc)) from None

    def size_limits(self) -> SizeLimits:
        return SizeLimits(self.max_model_bytes, self.max_model_bytes, self.max_npz_inflated_bytes)

    def check_exposure(self) -> str:
        """Refuse an open service on a non-loopback host (unless insecure); returns a warning or ""."""
        if self.key_ring().enabled:
            return ""
        if self.host not in LOOPBACK_HOSTS and not self.insecure:
            raise ConfigError(f"no API keys configured and host {self.host} is not loopback: set api_keys / "
                              f"admin_api_keys ({API_KEYS_ENV}, {ADMIN_KEYS_ENV}) or pass --insecure")
        return ("WARNING: serving without API keys: every local client may decide, post feedback and swap models "
                "(requests must name a loopback Host; web pages' POSTs are refused)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServeConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown serve config key(s): {', '.join(unknown)}")
        return cls(**data).validate()

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> ServeConfig:
        data: dict[str, Any] = {}
        if path:
            import yaml

            text = Path(path).read_text()
            loaded = yaml.safe_load(text) or {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"{path}: a serve config is a YAML mapping")
            data.update(loaded)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(data)

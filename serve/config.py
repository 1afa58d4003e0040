"""Settings of the decision service: where it listens, what it serves, how it scales and guards.

Loaded from a YAML file (`halo serve --config serve.yaml`) with command-line overrides; every key
is optional. Unknown keys are refused so a typo does not silently keep a default.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

API_KEYS_ENV = "HALO_SERVE_API_KEYS"

# Ray Serve runs user code and the proxy's router on event loops of their own threads by default;
# on a small node each cross-thread hop costs CPU and latency. On the main loops instead, a
# fast-policy decision's p50 over HTTP went from 9.9 to 8.7 ms here (benchmarks/serve.py). Safe for
# this service: it never blocks its loop (slow runtimes decide in a worker thread). These are read
# when Ray's processes start, so they are set before a local Ray starts (an existing value wins)
# and belong in the environment of a cluster's pods (k8s ConfigMap halo-config).
SERVE_LATENCY_ENV = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0"}


def apply_serve_latency_env() -> None:
    for name, value in SERVE_LATENCY_ENV.items():
        os.environ.setdefault(name, value)


class ConfigError(ValueError):
    pass


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
    # Safety.
    api_keys: list[str] = field(default_factory=list)
    max_body_bytes: int = 1_048_576
    max_batch_states: int = 256
    metrics_public: bool = True
    # Feedback: trajectory store URL (local dir, file://, s3://); empty disables /v1/feedback.
    feedback_store: str = ""
    feedback_run_id: str = "serve-feedback"
    # How often replicas look for a new model version and report their metrics.
    sync_interval_s: float = 0.5
    registry_name: str = "halo-model-registry"
    registry_namespace: str = "halo"
    model_cache_dir: str = ""
    # Serve's own logging. Per-request access logs cost ~1.6 ms p50 and ~15 ms p99 per request on
    # a 2-core node (measured with a no-op deployment); /metrics already counts every request.
    access_log: bool = False
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
        if self.batch_wait_timeout_s < 0 or self.sync_interval_s <= 0:
            raise ConfigError("batch_wait_timeout_s and sync_interval_s must be positive")
        if self.log_level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ConfigError(f"log_level: {self.log_level!r} (want DEBUG, INFO, WARNING, ERROR or CRITICAL)")
        if any(not isinstance(k, str) or len(k) < 8 for k in self.api_keys):
            raise ConfigError("api_keys: every key must be a string of at least 8 characters")
        return self

    def effective_api_keys(self) -> list[str]:
        """Keys from the config plus the comma-separated HALO_SERVE_API_KEYS variable."""
        env = [k.strip() for k in os.environ.get(API_KEYS_ENV, "").split(",") if k.strip()]
        return list(dict.fromkeys([*self.api_keys, *env]))

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

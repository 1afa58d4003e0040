"""Starting and stopping the decision service (used by `halo serve`, the tests and the benchmark).

The model is verified in the caller before anything starts: a model whose manifest does not
verify is refused up front. Ray runs in-process unless an address is given.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from serve.config import ServeConfig, apply_serve_latency_env
from serve.runtime import verify_model


@dataclass
class RunningService:
    config: ServeConfig
    registry: Any
    owns_ray: bool
    owns_serve: bool
    direct_ports: list[int] = field(default_factory=list)  # replicas' own HTTP servers (direct ingress)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per start-up phase
    plan_runner: Any = None  # the plan jobs' runner actor (None without a plan store)
    resumed_plans: int = 0  # unfinished plan jobs the runner resumed at start-up

    @property
    def host(self) -> str:
        return self.config.host if self.config.host not in ("0.0.0.0", "::") else "127.0.0.1"

    @property
    def url(self) -> str:
        """Through Serve's proxy (any replica, Serve's router and backpressure)."""
        return f"http://{self.host}:{self.config.port}{self.config.route_prefix.rstrip('/')}"

    @property
    def fast_url(self) -> str:
        """The one URL to call: the replicas' shared fast-ingress port when `fast_port` is set,
        else the first replica's own port, else Serve's proxy."""
        if self.config.fast_port and self.config.fast_ingress:
            return f"http://{self.host}:{self.config.fast_port}{self.config.route_prefix.rstrip('/')}"
        return self.direct_url or self.url

    @property
    def direct_url(self) -> str:
        """The first live replica's own server: the fast path, no proxy hop ("" when direct ingress
        is off). Asked of the registry each time: a replaced replica listens on a new port."""
        urls = self.direct_urls()
        return urls[0] if urls else ""

    def direct_urls(self) -> list[str]:
        return [f"http://{self.host}:{p}{self.config.route_prefix.rstrip('/')}" for p in self.refresh_direct_ports()]

    def refresh_direct_ports(self) -> list[int]:
        """The direct-ingress ports of the replicas alive now (the launch-time ones if the registry
        cannot be asked)."""
        if not self.direct_ports:
            return []
        with contextlib.suppress(Exception):
            # a killed replica stays "alive" in the registry until its reports go stale (a few seconds):
            # keep the ports that accept a connection now
            live = [p for p in live_direct_ports(self.registry) if accepts_connection(self.host, p)]
            if live:
                self.direct_ports = live
        return self.direct_ports


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Start (or join) Ray; returns True when this call started it."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    apply_serve_latency_env()
    if address:
        ray.init(address=address, **kwargs)
    else:
        # "local": a new in-process cluster even when another one on this machine could be found
        ray.init(address="local", num_cpus=num_cpus or 2, **kwargs)
    return True


def ensure_serve(config: ServeConfig) -> bool:
    """Start Serve's proxy on the configured host/port unless Serve already runs."""
    from ray import serve

    if serve.context._get_global_client(raise_if_no_controller_running=False) is not None:  # noqa: SLF001
        return False
    serve.start(http_options={"host": config.host, "port": config.port,
                              "keep_alive_timeout_s": config.keep_alive_timeout_s},
                logging_config={"enable_access_log": config.access_log, "log_level": config.log_level})
    return True


def start_service(config: ServeConfig, *, address: str | None = None, num_cpus: int | None = None,
                  wait_ready_s: float = 120.0) -> RunningService:
    from ray import serve

    from serve.app import build_app

    marks = [time.monotonic()]
    config.validate()
    config.check_exposure()
    _, manifest = verify_model(config.model, config.model_cache_dir or None)
    marks.append(time.monotonic())
    owns_ray = ensure_ray(address, num_cpus)
    marks.append(time.monotonic())
    owns_serve = ensure_serve(config)
    marks.append(time.monotonic())
    registry = target_model(config, manifest, replace=True)
    serve.run(build_app(config), name=config.app_name, route_prefix=config.route_prefix)
    marks.append(time.monotonic())
    service = RunningService(config, registry, owns_ray, owns_serve)
    wait_ready(service.url, wait_ready_s)
    marks.append(time.monotonic())
    service.timings = dict(zip(("verify model", "ray start", "serve proxy start", "deploy replicas",
                                "first ready answer"), (b - a for a, b in zip(marks, marks[1:], strict=False)),
                               strict=True))
    service.direct_ports = wait_direct_ports(registry, config, wait_ready_s)
    direct = service.direct_url  # asks the registry and probes the ports: once
    if direct:
        wait_ready(direct, wait_ready_s)
    service.plan_runner, service.resumed_plans = start_plan_runner(config, wait_ready_s)
    return service


def start_plan_runner(config: ServeConfig, timeout_s: float) -> tuple[Any, int]:
    """The plan runner, started now so that unfinished jobs resume without waiting for a request;
    (None, 0) when the service has no plan store."""
    import ray

    from serve.plan_api import plan_settings
    from serve.plan_runner import get_runner

    settings = plan_settings(config)
    if settings is None:
        return None, 0
    runner = get_runner(settings, config.registry_namespace)
    return runner, ray.get(runner.ready.remote(), timeout=timeout_s)


def wait_direct_ports(registry: Any, config: ServeConfig, timeout_s: float) -> list[int]:
    """The direct-ingress ports the live replicas report (empty when direct ingress is off)."""
    import os

    if not config.fast_ingress and os.environ.get("RAY_SERVE_ENABLE_DIRECT_INGRESS") != "1":
        return []
    want = config.num_replicas if not config.autoscaling_config else 1
    deadline = time.monotonic() + timeout_s
    ports: list[int] = []
    while time.monotonic() < deadline:
        ports = live_direct_ports(registry, distinct=False)  # replicas sharing fast_port report one port
        if len(ports) >= want:
            return sorted(set(ports))
        time.sleep(0.2)
    return sorted(set(ports))


def accepts_connection(host: str, port: int) -> bool:
    import socket

    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def live_direct_ports(registry: Any, distinct: bool = True) -> list[int]:
    """The live replicas' direct-ingress ports (one per replica when not `distinct`)."""
    import ray

    replicas = ray.get(registry.status.remote(), timeout=10)["replicas"]
    ports = [r["direct_port"] for r in replicas.values() if r.get("alive") and r.get("direct_port")]
    return sorted(set(ports)) if distinct else ports


def target_model(config: ServeConfig, manifest: Any, *, replace: bool) -> Any:
    """The model registry actor, with `config.model` as its target: when it has none, or (replace)
    when it targets another model or version. Returns the registry handle."""
    import ray

    from serve.registry import get_or_create_registry

    registry = get_or_create_registry(config.registry_name, config.registry_namespace)
    target = ray.get(registry.target.remote())
    if target is None or replace and (target["ref"] != config.model or target["version"] != manifest.version):
        ray.get(registry.deploy.remote(config.model, {"name": manifest.name, "version": manifest.version,
                                                      "policy_class": manifest.policy_class}))
    return registry


def wait_ready(url: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{url}/readyz", timeout=5)
            if r.status_code == 200:
                return r.json()
            last = r.text
        except httpx.HTTPError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise TimeoutError(f"service at {url} not ready after {timeout_s}s: {last}")


def stop_service(service: RunningService) -> None:
    import ray
    from ray import serve

    if service.plan_runner is not None:  # first: its unfinished jobs resume in the next service's runner
        with contextlib.suppress(Exception):
            ray.kill(service.plan_runner)
        with contextlib.suppress(Exception):
            from serve.plan_budget import stop_plan_budget

            stop_plan_budget(service.config.app_name, service.config.registry_namespace)
    try:
        serve.delete(service.config.app_name)
    finally:
        with contextlib.suppress(Exception):
            ray.kill(service.registry)
        if service.owns_serve:
            serve.shutdown()
        if service.owns_ray:
            ray.shutdown()

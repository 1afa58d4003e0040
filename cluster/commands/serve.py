"""`halo serve`: start the Ray Serve decision endpoint for a trained model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cluster.commands.options import command, option

if TYPE_CHECKING:
    from serve.config import ServeConfig


@dataclass(kw_only=True)
class ServeOptions:
    """What to serve and how; each overrides its line in --config."""

    model: str = option(None, "--model", help="model directory or store URL (s3://) with manifest.json")
    host: str = option(None, help="listen address (default 127.0.0.1)")
    port: int = option(None, help="listen port (default 8000)")
    address: str = option(None, help="join this Ray cluster instead of starting Ray in-process")
    config: Path = option(None, "--config", exists=True, dir_okay=False, help="serve.yaml")
    num_cpus: int = option(2, help="CPUs for the in-process Ray")
    runtime: str = option(None, help="auto | cpu | vllm")
    replicas: int = option(None, "--replicas", help="fixed replica count")
    insecure: bool = option(None, "--insecure", help="allow serving without API keys on a non-loopback host")


def register(app: typer.Typer) -> None:
    app.command("serve")(command(serve, ServeOptions))


def serve(options: ServeOptions) -> None:
    """Serve decisions over HTTP until interrupted (Ctrl-C stops the service)."""
    import os
    import signal
    import threading
    import time

    from serve.launcher import stop_service

    cfg, service = start(options)
    stop = threading.Event()  # before "serving" is printed: a Ctrl-C right after it still stops cleanly
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        announce(cfg, service)
        while not stop.wait(0.5):
            pass
    finally:
        typer.echo("stopping the decision service")
        t0 = time.monotonic()
        stop_service(service)
        if os.environ.get("HALO_SERVE_TIMINGS") == "1":
            typer.echo(f"stopped in {time.monotonic() - t0:.1f}s", err=True)


def start(options: ServeOptions) -> tuple[ServeConfig, Any]:
    """The service up, or one line and exit 2 (3 for a store that does not answer)."""
    import os

    if not options.address:
        # Serve keeps a stopping direct-ingress replica up 30 s so a load balancer can drop it
        # first; a service on its own in-process Ray has none in front (k8s sets its own).
        os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S", "1")

    from serve.config import ConfigError, ServeConfig
    from serve.launcher import start_service
    from serve.model_source import ModelSourceError
    from train.manifest import ManifestError

    try:
        cfg = ServeConfig.load(options.config, model=options.model, host=options.host, port=options.port,
                               runtime=options.runtime, num_replicas=options.replicas, insecure=options.insecure)
        if not cfg.model:
            raise ConfigError("no model: pass --model or set `model:` in the config")
        if str(cfg.model).startswith(("s3://", "s3a://")):
            from cluster.preflight import check_store

            check_store(str(cfg.model))  # no credentials or no answer: one line, exit 3, before Ray
        warning = cfg.check_exposure()
        if warning:
            typer.echo(warning, err=True)
        return cfg, start_service(cfg, address=options.address, num_cpus=options.num_cpus)
    except (ConfigError, ManifestError, ModelSourceError) as exc:
        typer.echo(f"halo serve: {exc}", err=True)
        raise typer.Exit(2) from exc


def announce(cfg: ServeConfig, service: Any) -> None:
    """What is served where, once it answers /readyz."""
    import os

    import httpx

    ready = httpx.get(f"{service.url}/readyz", timeout=10).json()
    if os.environ.get("HALO_SERVE_TIMINGS") == "1":
        typer.echo("start-up: " + ", ".join(f"{k} {v:.1f}s" for k, v in service.timings.items()), err=True)
    typer.echo(f"serving {ready['name']} version {ready['version']} ({ready['policy_class']}, "
               f"runtime {ready['runtime']}) at {service.url}")
    typer.echo(f"  POST {service.url}/v1/decide   docs: {service.url}/docs   metrics: {service.url}/metrics")
    if service.direct_url:
        typer.echo(f"  direct ingress (the fast path, no proxy hop): {service.direct_url}")
    if cfg.key_ring().enabled:
        typer.echo("  API keys required (Authorization: Bearer KEY); admin routes need an admin key")

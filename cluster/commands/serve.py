"""`halo serve`: start the Ray Serve decision endpoint for a trained model."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        model: str = typer.Option(None, "--model", help="model directory or store URL (s3://) with manifest.json"),
        host: str = typer.Option(None, help="listen address (default 127.0.0.1)"),
        port: int = typer.Option(None, help="listen port (default 8000)"),
        address: str = typer.Option(None, help="join this Ray cluster instead of starting Ray in-process"),
        config: Path = typer.Option(None, "--config", exists=True, dir_okay=False, help="serve.yaml"),
        num_cpus: int = typer.Option(2, help="CPUs for the in-process Ray"),
        runtime: str = typer.Option(None, help="auto | cpu | vllm"),
        replicas: int = typer.Option(None, "--replicas", help="fixed replica count"),
        insecure: bool = typer.Option(None, "--insecure", help="allow serving without API keys on a non-loopback host"),
    ) -> None:
        """Serve decisions over HTTP until interrupted (Ctrl-C stops the service)."""
        import os
        import signal
        import threading
        import time

        if not address:
            # Serve keeps a stopping direct-ingress replica up 30 s so a load balancer can drop it
            # first; a service on its own in-process Ray has none in front (k8s sets its own).
            os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S", "1")

        from serve.config import ConfigError, ServeConfig
        from serve.launcher import start_service, stop_service
        from serve.model_source import ModelSourceError
        from train.manifest import ManifestError

        try:
            cfg = ServeConfig.load(config, model=model, host=host, port=port, runtime=runtime, num_replicas=replicas,
                                  insecure=insecure)
            if not cfg.model:
                raise ConfigError("no model: pass --model or set `model:` in the config")
            if str(cfg.model).startswith(("s3://", "s3a://")):
                from cluster.preflight import check_store

                check_store(str(cfg.model))  # no credentials or no answer: one line, exit 3, before Ray
            warning = cfg.check_exposure()
            if warning:
                typer.echo(warning, err=True)
            service = start_service(cfg, address=address, num_cpus=num_cpus)
        except (ConfigError, ManifestError, ModelSourceError) as exc:
            typer.echo(f"halo serve: {exc}", err=True)
            raise typer.Exit(2) from exc
        stop = threading.Event()  # before "serving" is printed: a Ctrl-C right after it still stops cleanly
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
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
            while not stop.wait(0.5):
                pass
        finally:
            typer.echo("stopping the decision service")
            t0 = time.monotonic()
            stop_service(service)
            if os.environ.get("HALO_SERVE_TIMINGS") == "1":
                typer.echo(f"stopped in {time.monotonic() - t0:.1f}s", err=True)

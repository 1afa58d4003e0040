"""`halo rollout`: the main job - many episodes on Ray into the trajectory store."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from cluster.commands import runs

    runs.register(app)  # `halo runs` belongs to the same part; one line in cluster/cli.py registers both

    @app.command()
    def rollout(
        tasks: str = typer.Option("planbench:all", "--tasks", help="task spec (default: bundled PlanBench)"),
        policy: str = typer.Option("rules+scripted", "--policy", help="policy spec: rules+scripted, random, "
                                                                      "student:URL, ..."),
        llm: str = typer.Option("sim", "--llm", help="sim[:world=FILE,realtime=1,latency_ms=2500,latency_sigma=0.5,"
                                                     "base_url=URL] (simulated agent world) or "
                                                     "openai:MODEL[@BASE_URL]"),
        llm_rpm: float = typer.Option(None, "--llm-rpm", help="LLM requests/min for the whole job (all workers)"),
        llm_tpm: float = typer.Option(None, "--llm-tpm", help="LLM tokens/min for the whole job (all workers)"),
        llm_concurrency: int = typer.Option(None, "--llm-concurrency",
                                            help="LLM calls in flight at once for the whole job"),
        store: str = typer.Option(None, "--store", help="store URL: a directory or s3://bucket/prefix "
                                                        "(default: $HALO_STORE_URL or ./halo-data)"),
        episodes: int = typer.Option(200, "--episodes", help="episodes to run (tasks are cycled with new seeds)"),
        replicas: int = typer.Option(None, "--replicas", help="worker actors (default: one per CPU)"),
        cpus_per_worker: int = typer.Option(1, "--cpus-per-worker", help="CPUs each worker holds for solvers"),
        pin_cpus: bool = typer.Option(True, "--pin-cpus/--no-pin-cpus",
                                      help="run each worker on CPUs of its own (unpinned where none are free)"),
        address: str = typer.Option(None, "--address", help="join this Ray cluster instead of starting one"),
        run_id: str = typer.Option(None, "--run-id", help="run ID (default: derived from the arguments, so "
                                                          "re-running the same command resumes)"),
        seed: int = typer.Option(0, "--seed"),
        max_steps: int = typer.Option(10, "--max-steps"),
        dashboard: bool = typer.Option(False, "--dashboard", help="start the Ray dashboard (about 1 GB)"),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="live progress display"),
        retry_quarantined: bool = typer.Option(False, "--retry-quarantined",
                                               help="when resuming, run tasks an earlier session quarantined again"),
        backup_tail: bool = typer.Option(True, "--backup-tail/--no-backup-tail",
                                         help="at the end, idle workers also run the last episodes still in "
                                              "flight; the first copy to finish is kept (costs extra LLM calls)"),
    ) -> None:
        """Run episodes in parallel on Ray and commit each exactly once to the trajectory store."""
        from cluster.commands.runs import print_run_report
        from cluster.config import Settings
        from cluster.ray_cluster import shutdown, start_or_join
        from rollout.driver import RolloutConfig, RolloutJob
        from rollout.policies import PolicySpecError
        from rollout.tasks import TaskSpecError

        config = RolloutConfig(store_url=store or Settings.from_env().store_url, tasks=tasks, policy=policy,
                               llm=llm, episodes=episodes, replicas=replicas, cpus_per_worker=cpus_per_worker,
                               pin_cpus=pin_cpus,
                               run_id=run_id, seed=seed, max_steps=max_steps, progress=progress,
                               retry_quarantined=retry_quarantined, backup_tail=backup_tail, llm_rpm=llm_rpm,
                               llm_tpm=llm_tpm, llm_concurrency=llm_concurrency)
        try:
            job = RolloutJob(config)
        except (TaskSpecError, PolicySpecError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        typer.echo(f"run {job.run_id}: {len(job.specs)} episodes over {len(job.tasks)} tasks -> {job.store.url}",
                   err=True)
        try:
            handle = start_or_join(address, dashboard=dashboard)
            try:
                summary = job.run()
            except ValueError as exc:  # e.g. the run exists with other arguments
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(2) from exc
            finally:
                shutdown(handle)
        except KeyboardInterrupt as exc:  # Ctrl-C before the job's own loop took over
            typer.echo("interrupted before any episode ran; nothing was committed", err=True)
            raise typer.Exit(130) from exc
        typer.echo(f"{summary.status}: {summary.committed} new episodes committed ({summary.resumed} already there) "
                   f"in {summary.wall_s:.1f}s, {summary.episodes_per_s:.1f} episodes/s on {summary.workers} workers"
                   + (f"; {len(summary.quarantined)} tasks quarantined" if summary.quarantined else "")
                   + (f"; solver cache hit rate {summary.solver_cache_hit_rate:.0%}" if summary.solver_cache.get("hits")
                      or summary.solver_cache.get("misses") else ""), err=True)
        if summary.message:
            typer.echo(summary.message, err=True)
        print_run_report(job.store, job.run_id)
        raise typer.Exit({"completed": 0, "interrupted": 130}.get(summary.status, 1))

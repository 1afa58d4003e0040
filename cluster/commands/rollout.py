"""`halo rollout`: the main job - many episodes on Ray into the trajectory store."""

from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import typer

from cluster.commands.options import command, option
from cluster.errors import EXIT_FAILED, EXIT_INTERRUPTED, Busy, UsageError
from cluster.preflight import preflight_rollout

if TYPE_CHECKING:
    from rollout.driver import RolloutConfig, RolloutJob
    from rollout.driver.summary import RolloutSummary


@dataclass(kw_only=True)
class JobOptions:
    """The options that are RolloutConfig fields of the same name."""

    tasks: str = option("planbench:all", "--tasks", help="task spec (default: bundled PlanBench)")
    policy: str = option("rules+scripted", "--policy", help="policy spec: rules+scripted, random, student:URL, ...")
    llm: str = option("sim", "--llm", help="sim[:world=FILE,realtime=1,latency_ms=2500,latency_sigma=0.5,"
                                           "base_url=URL] (simulated agent world) or openai:MODEL[@BASE_URL]")
    llm_rpm: float = option(None, "--llm-rpm", help="LLM requests/min for the whole job (all workers)")
    llm_tpm: float = option(None, "--llm-tpm", help="LLM tokens/min for the whole job (all workers)")
    llm_concurrency: int = option(None, "--llm-concurrency", help="LLM calls in flight at once for the whole job")
    episodes: int = option(200, "--episodes", help="episodes to run (tasks are cycled with new seeds)")
    replicas: int = option(None, "--replicas", help="worker actors (default: one per CPU)")
    cpus_per_worker: int = option(1, "--cpus-per-worker", help="CPUs each worker holds for solvers")
    pin_cpus: bool = option(True, "--pin-cpus/--no-pin-cpus",
                            help="run each worker on CPUs of its own (unpinned where none are free)")
    run_id: str = option(None, "--run-id", help="run ID (default: derived from the arguments, so re-running the "
                                                "same command resumes)")
    seed: int = option(0, "--seed")
    max_steps: int = option(10, "--max-steps")
    progress: bool = option(True, "--progress/--no-progress", help="live progress display")
    retry_quarantined: bool = option(False, "--retry-quarantined",
                                     help="when resuming, run tasks an earlier session quarantined again")
    backup_tail: bool = option(True, "--backup-tail/--no-backup-tail",
                               help="at the end, idle workers also run the last episodes still in flight; the "
                                    "first copy to finish is kept (costs extra LLM calls)")


@dataclass(kw_only=True)
class RunOptions:
    """Where the job runs and what it prints."""

    store: str = option(None, "--store", help="store URL: a directory or s3://bucket/prefix "
                                              "(default: $HALO_STORE_URL or ./halo-data)")
    address: str = option(None, "--address", help="join this Ray cluster instead of starting one")
    dashboard: bool = option(False, "--dashboard", help="start the Ray dashboard (about 1 GB)")
    dry_run: bool = option(False, "--dry-run", help="print the run ID, domain mix, episodes to resume and an "
                                                    "estimate; run nothing")
    as_json: bool = option(False, "--json", help="print the job's summary as JSON (stdout)")


def register(app: typer.Typer) -> None:
    from cluster.commands import runs

    runs.register(app)  # `halo runs` belongs to the same part; one line in cluster/cli.py registers both
    app.command("rollout")(command(rollout, JobOptions, RunOptions))


def rollout(job_options: JobOptions, run: RunOptions) -> None:
    """Run episodes in parallel on Ray and commit each exactly once to the trajectory store."""
    config = rollout_config(job_options, run.store)
    job = make_job(config)
    if run.dry_run:
        print_dry_run(job, as_json=run.as_json)
        return
    preflight_rollout(config.llm, config.policy, config.store_url)  # before Ray starts: one line and exit 3
    refuse_second_writer(job)
    stored = job.asks_fewer_than_stored()
    if stored is not None:
        typer.echo(job.fewer_message(stored), err=True)
        raise typer.Exit(0)
    summary = run_job(job, run.address, dashboard=run.dashboard)
    report_summary(job, summary, as_json=run.as_json)
    raise typer.Exit({"completed": 0, "interrupted": EXIT_INTERRUPTED}.get(summary.status, EXIT_FAILED))


def rollout_config(job_options: JobOptions, store: str | None) -> RolloutConfig:
    """The job's config from its options (the store: --store, else $HALO_STORE_URL, else ./halo-data)."""
    from cluster.config import Settings
    from rollout.driver import RolloutConfig

    return RolloutConfig(store_url=store or Settings.from_env().store_url, **asdict(job_options))


def make_job(config: RolloutConfig) -> RolloutJob:
    """All argument and spec checks, before Ray starts (exit 2 with one line)."""
    from rollout.driver import RolloutJob

    try:
        return RolloutJob(config)
    except ValueError as exc:  # TaskSpecError, PolicySpecError, SimSpecError, ... are ValueErrors
        raise UsageError(str(exc).strip().splitlines()[0]) from exc


def refuse_second_writer(job: RolloutJob) -> None:
    """A live writer of the run: exit 4 now, before Ray starts (the job's own lease still guards a race)."""
    from rollout.driver.lifecycle import live_writer

    held = live_writer(job.store, job.run_id)
    if held is not None:
        raise Busy(f"run {job.run_id} is being written by another process ({held.describe()}); "
                   f"`halo runs stop {job.run_id}` stops it, or use another --run-id")


def run_job(job: RolloutJob, address: str | None, *, dashboard: bool) -> RolloutSummary:
    """Ray up, the job, Ray down; SIGTERM (a pod stop, `kill`) is handled like Ctrl-C."""
    from cluster.ray_cluster import shutdown, start_or_join
    from rollout.store.lease import LeaseHeld

    typer.echo(f"run {job.run_id}: {len(job.specs)} episodes over {len(job.tasks)} tasks -> {job.store.url}",
               err=True)
    summary: RolloutSummary | None = None
    try:
        handle = start_or_join(address, dashboard=dashboard)
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # after Ray installed its own
        try:
            summary = job.run()
            return summary
        except LeaseHeld as exc:  # another writer won the race for the run's lease
            raise Busy(str(exc)) from exc
        except ValueError as exc:  # e.g. the run exists with other arguments
            raise UsageError(str(exc)) from exc
        finally:
            signal.signal(signal.SIGTERM, previous)
            shutdown(handle)
    except KeyboardInterrupt as exc:
        if summary is not None:  # Ctrl-C while Ray went down: the job had already ended and said how
            return summary
        typer.echo("interrupted before any episode ran; nothing was committed", err=True)  # before the job's loop
        raise typer.Exit(EXIT_INTERRUPTED) from exc


def report_summary(job: RolloutJob, summary: RolloutSummary, *, as_json: bool) -> None:
    from cluster.commands.runs import print_run_report

    if as_json:
        typer.echo(json.dumps(summary_json(summary), indent=1))
        return
    typer.echo(f"{summary.status}: {summary.committed} new episodes committed ({summary.resumed} already there) "
               f"in {summary.wall_s:.1f}s, {summary.episodes_per_s:.1f} episodes/s on {summary.workers} workers"
               + (f"; {len(summary.quarantined)} tasks quarantined" if summary.quarantined else "")
               + (f"; {summary.infra_failures} infrastructure failures (not committed)"
                  if summary.infra_failures else "")
               + (f"; solver cache hit rate {summary.solver_cache_hit_rate:.0%}" if summary.solver_cache.get("hits")
                  or summary.solver_cache.get("misses") else ""), err=True)
    if summary.message:
        typer.echo(summary.message, err=True)
    if summary.top_failures:
        typer.echo("top failure reasons: " + ", ".join(f"{k} {v}" for k, v in summary.top_failures), err=True)
    print_run_report(job.store, job.run_id)


def summary_json(summary: RolloutSummary) -> dict[str, Any]:
    return {"run_id": summary.run_id, "status": summary.status, "store": summary.store_url,
            "requested": summary.requested, "committed": summary.resumed + summary.committed,
            "new": summary.committed, "resumed": summary.resumed, "succeeded": summary.succeeded,
            "infra_failures": summary.infra_failures, "dropped": summary.dropped,
            "quarantined": [q.task_id for q in summary.quarantined], "top_failures": summary.top_failures,
            "message": summary.message, "wall_s": round(summary.wall_s, 3)}


def print_dry_run(job: RolloutJob, *, as_json: bool) -> None:
    """What the job would do: run ID, domain mix, episodes stored and to run, an estimate."""
    from rollout.driver.dry_run import plan_summary

    plan = plan_summary(job)
    if as_json:
        typer.echo(json.dumps(plan, indent=1))
        return
    typer.echo(f"run {plan['run_id']} in {plan['store']}: {plan['requested']} episodes, "
               f"{plan['stored']} already stored, {plan['to_run']} to run")
    typer.echo("domain mix: " + ", ".join(f"{d} {n}" for d, n in plan["domains"].items()))
    typer.echo(f"estimate: {plan['estimate']}")

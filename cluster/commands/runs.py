"""`halo runs`: the runs in a trajectory store; `halo runs show RUN`: one run's report table."""

from __future__ import annotations

import datetime as dt

import typer

runs_app = typer.Typer(help="Runs in the trajectory store.", no_args_is_help=False)


def _console():  # noqa: ANN202
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)  # logs and pipes get the full table


def _store(url: str | None):  # noqa: ANN202  (TrajectoryStore; imported lazily)
    from cluster.config import Settings
    from rollout.store import TrajectoryStore

    return TrajectoryStore(url or Settings.from_env().store_url)


def print_run_report(store, run_id: str, by: tuple[str, ...] = (), *, markdown: bool = False) -> bool:  # noqa: ANN001
    """The refinement-loop report for one run (rollout.report), split by `by` (e.g. domain, level)
    when given, as a Markdown table with `markdown`; False when the run has no episodes."""
    from rich.table import Table

    from rollout.report import HEADERS, summarize, summary_row

    console = _console()
    episodes = store.read_episodes([run_id])
    meta = store.read_run_meta(run_id)
    if not episodes:
        console.print(f"run {run_id}: no committed episodes" + (f" (status {meta.status})" if meta else ""))
        return False
    by_policy: dict[str, list] = {}
    for ep in episodes:
        by_policy.setdefault(ep.policy_name, []).append(ep)
    backends = {ep.llm_backend for ep in episodes}
    title = f"run {run_id}"
    if backends == {"sim"}:
        title += "  SIMULATED agent world (llm_backend=sim) - not real-LLM results"
        world = (meta.config.get("sim_world") if meta else None) or {}
        if world:
            title += f"; world {world.get('name')} {world.get('hash')}"
    if markdown:
        from rollout.report import format_grouped, format_markdown, summarize_by

        typer.echo(title)  # plain echo: a console would wrap the long Markdown rows
        if by:
            typer.echo(format_grouped(summarize_by(episodes, by), by, markdown=True))
        else:
            typer.echo(format_markdown([summarize(p, r) for p, r in sorted(by_policy.items())]))
    elif by:
        from rollout.report import summarize_by

        cols = [k for k in by if k != "policy"]
        table = Table(*cols, *HEADERS, title=title, title_justify="left")
        for values, s in summarize_by(episodes, by):
            table.add_row(*values, *summary_row(s))
    else:
        table = Table(*HEADERS, title=title, title_justify="left")
        for policy, records in sorted(by_policy.items()):
            table.add_row(*summary_row(summarize(policy, records)))
    if not markdown:
        console.print(table)
    if meta is not None:
        line = f"status {meta.status}: {len(episodes)}/{meta.episodes_requested} episodes committed"
        if meta.config.get("tasks"):
            line += f"; tasks {meta.config['tasks']}, seed {meta.config.get('seed')}"
        console.print(line, highlight=False)
        if meta.message:
            console.print(meta.message, highlight=False)
        for q in meta.quarantined:
            first = q.error.strip().splitlines()[0] if q.error.strip() else ""
            console.print(f"quarantined {q.task_id} after {q.attempts} failures: {first}", highlight=False)
    return True


@runs_app.callback(invoke_without_command=True)
def runs(ctx: typer.Context,
         store: str = typer.Option(None, "--store", help="store URL (default: $HALO_STORE_URL or ./halo-data)")
         ) -> None:
    """List the runs with a one-line summary each."""
    ctx.obj = store
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Column, Table

    infos = _store(store).list_runs()
    if not infos:
        typer.echo("no runs in the store")
        return
    table = Table(Column("run", no_wrap=True), "status", "episodes", "steps", "validator success",
                  "oracle success", "backend", "policy", "quarantined", "started")
    for r in infos:
        started = dt.datetime.fromtimestamp(r.created_at).strftime("%Y-%m-%d %H:%M") if r.created_at else "-"
        oracle = "n/a" if r.success_oracle is None else f"{r.success_oracle:.1%}"
        backend = f"{r.llm_backend} (simulated)" if r.simulated else r.llm_backend
        table.add_row(r.run_id, r.status, f"{r.episodes}/{r.episodes_requested}", str(r.steps),
                      f"{r.success_validator:.1%}", oracle, backend, r.policy, str(r.quarantined), started)
    _console().print(table)


@runs_app.command()
def show(ctx: typer.Context, run_id: str = typer.Argument(..., help="run ID (see `halo runs`)"),
         store: str = typer.Option(None, "--store", help="store URL"),
         by: str = typer.Option(None, "--by", help="split rows by domain, level, family (comma list)")) -> None:
    """Print the report table of one run (oracle/validator success, steps, LLM calls, cost)."""
    show_stored_run(run_id, store or ctx.obj, by)


def show_stored_run(run_id: str, store: str | None, by: str | None, *, markdown: bool = False) -> None:
    """`halo runs show` and `halo report --run`: a clear exit 2 for a bad run ID, grouping or run."""
    from rollout.report import parse_group_by
    from rollout.store import check_run_id

    try:
        check_run_id(run_id)
        group_by = parse_group_by(by)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    the_store = _store(store)
    if the_store.read_run_meta(run_id) is None and not the_store.episode_ids(run_id):
        known = ", ".join(r.run_id for r in the_store.list_runs()) or "none"
        typer.echo(f"error: no run {run_id!r} in {the_store.url} (runs: {known})", err=True)
        raise typer.Exit(2)
    print_run_report(the_store, run_id, group_by, markdown=markdown)


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")

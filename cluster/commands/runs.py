"""`halo runs`: the runs in a trajectory store; `halo runs show RUN`: one run's report table."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import typer

from cluster.commands.tables import console, print_table
from cluster.errors import UsageError

runs_app = typer.Typer(help="Runs in the trajectory store.", no_args_is_help=False)


def _console():  # noqa: ANN202
    return console()


def _store(url: str | None):  # noqa: ANN202  (TrajectoryStore; imported lazily)
    from cluster.config import Settings
    from cluster.preflight import check_store
    from rollout.store import TrajectoryStore

    url = url or Settings.from_env().store_url
    check_store(url)  # no credentials, no answer: one line and exit 3, not a minute of retries
    return TrajectoryStore(url)


def print_run_report(store, run_id: str, by: tuple[str, ...] = (), *, markdown: bool = False,  # noqa: ANN001
                     wide: bool = False) -> bool:
    """The refinement-loop report for one run (rollout.loop.report), split by `by` (e.g. domain, level)
    when given, as a Markdown table with `markdown`; False when the run has no episodes."""
    from rollout.loop.report import HEADERS, summarize, summary_row

    episodes = store.read_episodes([run_id])
    meta = store.read_run_meta(run_id)
    if not episodes:
        typer.echo(f"run {run_id}: no committed episodes" + (f" (status {meta.status})" if meta else ""))
        return False
    by_policy: dict[str, list] = {}
    for ep in episodes:
        by_policy.setdefault(ep.policy_name, []).append(ep)
    title = f"run {run_id}"
    if {ep.llm_backend for ep in episodes} == {"sim"}:
        title += "\nSIMULATED agent world (llm_backend=sim) - not real-LLM results"
        world = (meta.config.get("sim_world") if meta else None) or {}
        if world:
            title += f"; world {world.get('name')} {world.get('hash')}"
    if markdown:
        from rollout.loop.report import format_grouped, format_markdown, summarize_by

        typer.echo(title)  # plain echo: a console would wrap the long Markdown rows
        if by:
            typer.echo(format_grouped(summarize_by(episodes, by), by, markdown=True))
        else:
            typer.echo(format_markdown([summarize(p, r) for p, r in sorted(by_policy.items())]))
    elif by:
        from rollout.loop.report import summarize_by

        cols = [k for k in by if k != "policy"]
        rows = [(*values, *summary_row(s)) for values, s in summarize_by(episodes, by)]
        print_table(title, (*cols, *HEADERS), rows, wide=wide, key_columns=len(cols) + 1)
    else:
        rows = [summary_row(summarize(policy, records)) for policy, records in sorted(by_policy.items())]
        print_table(title, HEADERS, rows, wide=wide)
    if meta is not None:
        _print_meta(meta, len(episodes))
    _print_duplicates(store, run_id)
    return True


def _print_meta(meta, committed: int) -> None:  # noqa: ANN001
    line = f"status {meta.status}: {committed}/{meta.episodes_requested} episodes committed"
    if meta.config.get("tasks"):
        line += f"; tasks {meta.config['tasks']}, seed {meta.config.get('seed')}"
    typer.echo(line)
    if meta.message:
        typer.echo(meta.message)
    infra = {k: v for k, v in meta.errors.items() if k.startswith("infra:")}
    if infra:
        typer.echo("infrastructure failures (not committed): " + ", ".join(f"{k[6:]} {v}" for k, v in infra.items()))
    for q in meta.quarantined:
        first = q.error.strip().splitlines()[0] if q.error.strip() else ""
        typer.echo(f"quarantined {q.task_id} after {q.attempts} failures: {first}")


def duplicate_episodes(store, run_id: str) -> tuple[int, int]:  # noqa: ANN001
    """(episodes stored more than once, surplus rows) in the run's table; (0, 0) for a sound run."""
    import pyarrow.compute as pc

    table = store.read_table([run_id], columns=["episode_id", "step"])
    if table.num_rows == 0:
        return 0, 0
    counts = table.group_by(["episode_id", "step"]).aggregate([("step", "count")])
    repeated = counts.filter(pc.greater(counts["step_count"], 1))
    if repeated.num_rows == 0:
        return 0, 0
    surplus = pc.sum(pc.subtract(repeated["step_count"], 1)).as_py()
    return len(set(repeated.column("episode_id").to_pylist())), int(surplus)


def _print_duplicates(store, run_id: str) -> None:  # noqa: ANN001
    episodes, rows = duplicate_episodes(store, run_id)
    if episodes:
        typer.echo(f"WARNING: {episodes} episode(s) are stored more than once ({rows} surplus step rows); "
                   "two writers committed this run")


@runs_app.callback(invoke_without_command=True)
def runs(ctx: typer.Context,
         store: str = typer.Option(None, "--store", help="store URL (default: $HALO_STORE_URL or ./halo-data)"),
         as_json: bool = typer.Option(False, "--json", help="print JSON: each run with run_id, status, "
                                                            "requested, committed, ..."),
         wide: bool = typer.Option(False, "--wide", help="one wide table row per run (default: fit the terminal)"),
         ) -> None:
    """List the runs with a one-line summary each (a `running` run without a live writer shows
    as `interrupted`)."""
    ctx.obj = store
    if ctx.invoked_subcommand is not None:
        return
    the_store = _store(store)
    infos = _with_stale_marked(the_store, the_store.list_runs())
    if as_json:
        typer.echo(json.dumps([_run_json(r) for r in infos], indent=1))
        return
    if not infos:
        typer.echo("no runs in the store")
        return
    out = _console()
    if wide or out.width >= WIDE_TABLE_COLUMNS:
        _print_runs_table(infos, console(wide=True) if wide else out)
    else:
        _print_runs_stacked(infos, max(40, out.width - 1))


WIDE_TABLE_COLUMNS = 150  # what the one-row-per-run table needs without cutting a value


def _with_stale_marked(store, infos: list) -> list:  # noqa: ANN001
    from rollout.driver.lifecycle import mark_if_stale

    out = []
    for info in infos:
        if info.status == "running":
            meta = store.read_run_meta(info.run_id)
            if meta is not None and mark_if_stale(store, meta):
                info = dataclasses.replace(info, status="interrupted")
        out.append(info)
    return out


def _run_json(r) -> dict:  # noqa: ANN001
    return {"run_id": r.run_id, "status": r.status, "requested": r.episodes_requested, "committed": r.episodes,
            "steps": r.steps, "success_validator": r.success_validator, "success_oracle": r.success_oracle,
            "llm_backend": r.llm_backend, "simulated": r.simulated, "policy": r.policy,
            "quarantined": r.quarantined, "created_at": r.created_at}


def _started(r) -> str:  # noqa: ANN001
    return dt.datetime.fromtimestamp(r.created_at).strftime("%Y-%m-%d %H:%M") if r.created_at else "-"


def _print_runs_table(infos: list, console) -> None:  # noqa: ANN001
    from rich.table import Column, Table

    table = Table(Column("run", no_wrap=True), "status", "episodes", "steps", "validator success",
                  "oracle success", "backend", "policy", "quarantined", "started")
    for r in infos:
        oracle = "n/a" if r.success_oracle is None else f"{r.success_oracle:.1%}"
        backend = f"{r.llm_backend} (simulated)" if r.simulated else r.llm_backend
        table.add_row(r.run_id, r.status, f"{r.episodes}/{r.episodes_requested}", str(r.steps),
                      f"{r.success_validator:.1%}", oracle, backend, r.policy, str(r.quarantined), _started(r))
    console.print(table)


def _print_runs_stacked(infos: list, width: int) -> None:
    """A short title line per run, then `label value` pairs packed into the terminal's width:
    fits 80 columns and cuts nothing (`--wide` for the table)."""
    from cluster.commands.tables import stacked

    headers = ("run", "status", "episodes", "validator", "oracle", "steps", "backend", "policy", "quarantined",
               "started")
    rows = []
    for r in infos:
        oracle = "n/a" if r.success_oracle is None else f"{r.success_oracle:.1%}"
        backend = f"{r.llm_backend} (simulated)" if r.simulated else r.llm_backend
        rows.append((r.run_id, r.status, f"{r.episodes}/{r.episodes_requested} episodes",
                     f"{r.success_validator:.1%}", oracle, str(r.steps), backend, r.policy, str(r.quarantined),
                     _started(r)))
    typer.echo(stacked(headers, rows, width=width, key_columns=3))


@runs_app.command()
def show(ctx: typer.Context, run_id: str = typer.Argument(..., help="run ID (see `halo runs`)"),
         store: str = typer.Option(None, "--store", help="store URL"),
         by: str = typer.Option(None, "--by", help="split rows by domain, level, family (comma list)"),
         as_json: bool = typer.Option(False, "--json", help="print JSON"),
         wide: bool = typer.Option(False, "--wide", help="one wide table (default: fit the terminal)")) -> None:
    """Print the report table of one run (oracle/validator success, steps, LLM calls, cost)."""
    show_stored_run(run_id, store or ctx.obj, by, as_json=as_json, wide=wide)


@runs_app.command()
def stop(ctx: typer.Context, run_id: str = typer.Argument(..., help="run ID (see `halo runs`)"),
         store: str = typer.Option(None, "--store", help="store URL"),
         wait: float = typer.Option(30.0, "--wait", help="seconds to wait for the writer to close the run")) -> None:
    """Stop a running run (its job commits what finished and ends `interrupted`; the same command resumes it)."""
    from rollout.driver.lifecycle import request_stop

    try:
        typer.echo(request_stop(_store(store or ctx.obj), _checked(run_id), wait_s=wait))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


@runs_app.command()
def delete(ctx: typer.Context, run_id: str = typer.Argument(..., help="run ID (see `halo runs`)"),
           store: str = typer.Option(None, "--store", help="store URL"),
           yes: bool = typer.Option(False, "--yes", "-y", help="do not ask")) -> None:
    """Delete a run: its episodes, files and metadata (refused while a writer holds it)."""
    from rollout.driver.lifecycle import delete_run

    the_store = _store(store or ctx.obj)
    _require_run(the_store, _checked(run_id))
    if not yes and not typer.confirm(f"delete run {run_id} from {the_store.url}?"):
        raise typer.Exit(1)
    typer.echo(f"deleted run {run_id}: {delete_run(the_store, run_id)} episodes")


def _checked(run_id: str) -> str:
    from rollout.store import check_run_id

    try:
        return check_run_id(run_id)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _require_run(the_store, run_id: str) -> None:  # noqa: ANN001
    if the_store.read_run_meta(run_id) is None and not the_store.episode_ids(run_id):
        known = ", ".join(r.run_id for r in the_store.list_runs()) or "none"
        raise UsageError(f"no run {run_id!r} in {the_store.url} (runs: {known})")


def show_stored_run(run_id: str, store: str | None, by: str | None, *, markdown: bool = False,
                    as_json: bool = False, wide: bool = False) -> None:
    """`halo runs show` and `halo report --run`: a clear exit 2 for a bad run ID, grouping or run."""
    from rollout.driver.lifecycle import mark_if_stale
    from rollout.loop.report import parse_group_by

    try:
        group_by = parse_group_by(by)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    the_store = _store(store)
    _require_run(the_store, _checked(run_id))
    meta = the_store.read_run_meta(run_id)
    if meta is not None:
        mark_if_stale(the_store, meta)
    if as_json:
        typer.echo(json.dumps(run_report_json(the_store, run_id), indent=1))
        return
    print_run_report(the_store, run_id, group_by, markdown=markdown, wide=wide)


def run_report_json(store, run_id: str) -> dict:  # noqa: ANN001
    from dataclasses import asdict

    from rollout.loop.report import summarize

    episodes = store.read_episodes([run_id])
    meta = store.read_run_meta(run_id)
    by_policy: dict[str, list] = {}
    for ep in episodes:
        by_policy.setdefault(ep.policy_name, []).append(ep)
    dup_episodes, dup_rows = duplicate_episodes(store, run_id)
    return {"run_id": run_id, "status": meta.status if meta else "unknown",
            "requested": meta.episodes_requested if meta else len(episodes),
            "committed": len({e.episode_id for e in episodes}),
            "simulated": bool(episodes) and {e.llm_backend for e in episodes} == {"sim"},
            "message": meta.message if meta else "", "errors": meta.errors if meta else {},
            "duplicate_episodes": dup_episodes, "duplicate_rows": dup_rows,
            "policies": [asdict(summarize(p, r)) for p, r in sorted(by_policy.items())]}


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")

"""`halo report`: oracle/validator success, steps, LLM calls and cost per policy on a task set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from cluster.commands.options import command, option

if TYPE_CHECKING:
    from rollout.core.trajectory import EpisodeRecord
    from rollout.sim.world import SimConfig


@dataclass(kw_only=True)
class Episodes:
    """What runs: tasks, policies, world, seeds."""

    tasks: str = option("planbench:blocksworld:100", "--tasks", help="task spec")
    policy: str = option("random,scripted,rules+scripted", "--policy", help="comma-separated policy specs")
    llm: str = option("sim", "--llm", help="sim[:world=FILE] (the simulated agent world)")
    seed: int = option(0, "--seed")
    episodes: int = option(1, "--episodes", min=1, help="episodes per task (seeds seed, seed+1, ...)")
    max_steps: int = option(10, "--max-steps")
    concurrency: int = option(8, "--concurrency", min=1, help="episodes in flight at once")


@dataclass(kw_only=True)
class Output:
    """What is printed, and from where (--run: a stored run instead of new episodes)."""

    markdown: bool = option(False, "--markdown", help="print a Markdown table")
    by: str = option(None, "--by", help="also split each policy's row by domain, level, family "
                                        "(comma list; level: generated sets' difficulty)")
    run: str = option(None, "--run", help="report a run already in the trajectory store (see `halo runs`) "
                                          "instead of running episodes")
    store: str = option(None, "--store", help="store URL for --run (default: $HALO_STORE_URL or ./halo-data)")
    as_json: bool = option(False, "--json", help="print JSON (one object per policy)")
    wide: bool = option(False, "--wide", help="one wide table (default: fit the terminal)")


@dataclass
class Inputs:
    """The checked inputs of a report run."""

    sim: SimConfig
    tasks: list[Any]
    policies: dict[str, Any]  # spec -> policy
    group_by: tuple[str, ...]


def register(app: typer.Typer) -> None:
    app.command("report")(command(report, Episodes, Output))


def report(episodes: Episodes, output: Output) -> None:
    """Run every policy on the same tasks and seeds; print the comparison table (or, with
    --run, the table of a stored run)."""
    if output.run is not None:
        from cluster.commands.runs import show_stored_run

        show_stored_run(output.run, output.store, output.by, markdown=output.markdown, as_json=output.as_json,
                        wide=output.wide)
        return
    inputs = check_inputs(episodes, output.by)
    from cluster.preflight import check_policy_services

    for spec in inputs.policies:
        check_policy_services(spec)  # a student service that does not answer: one line, exit 3
    summaries, records = run_policies(episodes, inputs)
    print_report(episodes, output, inputs, summaries, records)


def check_inputs(episodes: Episodes, by: str | None) -> Inputs:
    """The world, tasks, policies and grouping, or one line and exit 2."""
    from rollout.loop.report import parse_group_by
    from rollout.policies import PolicySpecError, make_policy, split_policy_list
    from rollout.sim.runnable import sim_unrunnable
    from rollout.sim.spec import SimSpecError, is_sim_spec, sim_config_for
    from rollout.tasks import TaskSpecError, load_tasks

    if not is_sim_spec(episodes.llm):
        raise typer.BadParameter("only --llm sim[:world=FILE,...] is available here", param_hint="--llm")
    try:
        sim = sim_config_for(episodes.llm)
    except SimSpecError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        task_list = load_tasks(episodes.tasks)
        if (unrunnable := sim_unrunnable(task_list)) is not None:
            raise ValueError(unrunnable)
        policies = {spec: make_policy(spec, seed=episodes.seed) for spec in split_policy_list(episodes.policy)}
        group_by = parse_group_by(by)
    except (TaskSpecError, PolicySpecError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if not task_list:
        typer.echo("error: the task spec matched no tasks", err=True)
        raise typer.Exit(2)
    return Inputs(sim, task_list, policies, group_by)


def run_policies(episodes: Episodes, inputs: Inputs) -> tuple[list[Any], list[EpisodeRecord]]:
    """(one summary per policy, every episode record), each policy on the same tasks and seeds."""
    import asyncio
    import time

    from rollout.loop.episode import EpisodeConfig, run_episodes
    from rollout.loop.report import summarize

    summaries, all_records = [], []
    for spec, pol in inputs.policies.items():
        t0 = time.monotonic()
        records = []
        for k in range(episodes.episodes):
            config = EpisodeConfig(max_steps=episodes.max_steps, seed=episodes.seed + k, run_id="report",
                                   sim=inputs.sim)
            records += asyncio.run(run_episodes(inputs.tasks, pol, config, concurrency=episodes.concurrency))
        summaries.append(summarize(spec, records))
        all_records += records
        typer.echo(f"  {spec}: {len(records)} episodes in {time.monotonic() - t0:.1f}s", err=True)
    return summaries, all_records


def print_report(episodes: Episodes, output: Output, inputs: Inputs, summaries: list[Any],
                 records: list[EpisodeRecord]) -> None:
    from rollout.loop.report import HEADERS, format_grouped, format_markdown, summarize_by, summary_row
    from rollout.sim.spec import world_label

    if output.as_json:
        import json
        from dataclasses import asdict

        typer.echo(json.dumps({"simulated": True, "tasks": episodes.tasks, "seed": episodes.seed,
                               "episodes_per_task": episodes.episodes, "world": world_label(inputs.sim),
                               "policies": [asdict(s) for s in summaries]}, indent=1))
        return
    typer.echo(f"SIMULATED agent world (llm_backend=sim, world {world_label(inputs.sim)}) - not real-LLM results. "
               f"tasks: {episodes.tasks} ({len(inputs.tasks)}), seed {episodes.seed}, episodes/task "
               f"{episodes.episodes}, max steps {episodes.max_steps}")
    if inputs.group_by:
        typer.echo(format_grouped(summarize_by(records, inputs.group_by), inputs.group_by, markdown=output.markdown))
        return
    if output.markdown:
        typer.echo(format_markdown(summaries))
        return
    from cluster.commands.tables import print_table

    print_table("", HEADERS, [summary_row(s) for s in summaries], wide=output.wide)

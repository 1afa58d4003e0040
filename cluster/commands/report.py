"""`halo report`: oracle/validator success, steps, LLM calls and cost per policy on a task set."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        tasks: str = typer.Option("planbench:blocksworld:100", "--tasks", help="task spec"),
        policy: str = typer.Option("random,scripted,rules+scripted", "--policy",
                                   help="comma-separated policy specs"),
        llm: str = typer.Option("sim", "--llm", help="sim[:world=FILE] (the simulated agent world)"),
        seed: int = typer.Option(0, "--seed"),
        episodes: int = typer.Option(1, "--episodes", min=1, help="episodes per task (seeds seed, seed+1, ...)"),
        max_steps: int = typer.Option(10, "--max-steps"),
        concurrency: int = typer.Option(8, "--concurrency", min=1, help="episodes in flight at once"),
        markdown: bool = typer.Option(False, "--markdown", help="print a Markdown table"),
        by: str = typer.Option(None, "--by", help="also split each policy's row by domain, level, family "
                                                  "(comma list; level: generated sets' difficulty)"),
        run: str = typer.Option(None, "--run", help="report a run already in the trajectory store "
                                                    "(see `halo runs`) instead of running episodes"),
        store: str = typer.Option(None, "--store", help="store URL for --run (default: $HALO_STORE_URL "
                                                        "or ./halo-data)"),
        as_json: bool = typer.Option(False, "--json", help="print JSON (one object per policy)"),
        wide: bool = typer.Option(False, "--wide", help="one wide table (default: fit the terminal)"),
    ) -> None:
        """Run every policy on the same tasks and seeds; print the comparison table (or, with
        --run, the table of a stored run)."""
        if run is not None:
            from cluster.commands.runs import show_stored_run

            show_stored_run(run, store, by, markdown=markdown, as_json=as_json, wide=wide)
            return
        import asyncio
        import time

        from rollout.loop.episode import EpisodeConfig, run_episodes
        from rollout.loop.report import HEADERS, format_markdown, parse_group_by, summarize, summarize_by, summary_row
        from rollout.policies import PolicySpecError, make_policy, split_policy_list
        from rollout.sim.runnable import sim_unrunnable
        from rollout.sim.spec import SimSpecError, is_sim_spec, sim_config_for, world_label
        from rollout.tasks import TaskSpecError, load_tasks

        if not is_sim_spec(llm):
            raise typer.BadParameter("only --llm sim[:world=FILE,...] is available here", param_hint="--llm")
        try:
            sim = sim_config_for(llm)
        except SimSpecError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        try:
            task_list = load_tasks(tasks)
            if (unrunnable := sim_unrunnable(task_list)) is not None:
                raise ValueError(unrunnable)
            specs = split_policy_list(policy)
            policies = {spec: make_policy(spec, seed=seed) for spec in specs}
            group_by = parse_group_by(by)
        except (TaskSpecError, PolicySpecError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        if not task_list:
            typer.echo("error: the task spec matched no tasks", err=True)
            raise typer.Exit(2)
        from cluster.preflight import check_policy_services

        for spec in specs:
            check_policy_services(spec)  # a student service that does not answer: one line, exit 3
        summaries = []
        all_records = []
        for spec, pol in policies.items():
            t0 = time.monotonic()
            records = []
            for k in range(episodes):
                config = EpisodeConfig(max_steps=max_steps, seed=seed + k, run_id="report", sim=sim)
                records += asyncio.run(run_episodes(task_list, pol, config, concurrency=concurrency))
            summaries.append(summarize(spec, records))
            all_records += records
            typer.echo(f"  {spec}: {len(records)} episodes in {time.monotonic() - t0:.1f}s", err=True)
        if as_json:
            import json
            from dataclasses import asdict

            typer.echo(json.dumps({"simulated": True, "tasks": tasks, "seed": seed, "episodes_per_task": episodes,
                                   "world": world_label(sim), "policies": [asdict(s) for s in summaries]}, indent=1))
            return
        typer.echo(f"SIMULATED agent world (llm_backend=sim, world {world_label(sim)}) - not real-LLM results. "
                   f"tasks: {tasks} ({len(task_list)}), seed {seed}, episodes/task {episodes}, max steps {max_steps}")
        if group_by:
            from rollout.loop.report import format_grouped

            typer.echo(format_grouped(summarize_by(all_records, group_by), group_by, markdown=markdown))
            return
        if markdown:
            typer.echo(format_markdown(summaries))
            return
        from cluster.commands.tables import print_table

        print_table("", HEADERS, [summary_row(s) for s in summaries], wide=wide)

"""`halo eval`: run episodes with a trained policy and compare it with its baselines."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_(
        policy: Path = typer.Option(..., "--policy", help="trained model directory (manifest.json)"),
        tasks: str = typer.Option(..., "--tasks", help="task spec, e.g. planbench:all:10"),
        llm: str = typer.Option("sim", "--llm", help="sim[:world=FILE]: the simulated agent world"),
        episodes: int = typer.Option(1, help="episodes (seeds) per task"),
        teacher: str = typer.Option("rules+scripted:noise=0.3", help="policy spec of the teacher"),
        held_out: bool = typer.Option(True, help="skip tasks the model was trained on"),
        seed: int = typer.Option(1000, help="first episode seed"),
        concurrency: int = typer.Option(4),
        only: str = typer.Option("", help="comma-separated subset of model,teacher,random,majority"),
        as_json: bool = typer.Option(False, "--json", help="print JSON (one object per row)"),
        markdown: bool = typer.Option(False, "--markdown", help="print the Markdown table"),
        wide: bool = typer.Option(False, "--wide", help="one wide table (default: fit the terminal)"),
    ) -> None:
        """Print the comparison table: trained policy, teacher, random, majority class."""
        from rollout.sim.spec import is_sim_spec, sim_config_for, world_label
        from rollout.tasks.loaders import TaskSpecError, load_tasks
        from train.evaluate import evaluate, format_rows
        from train.evaluate import held_out as drop_trained
        from train.manifest import ManifestError

        if not is_sim_spec(llm):
            raise typer.BadParameter("only --llm sim[:world=FILE] is available offline")
        try:
            world = world_label(sim_config_for(llm))
            task_list = load_tasks(tasks)
            if held_out:
                task_list = drop_trained(task_list, policy)
            if not task_list:
                raise TaskSpecError(f"no tasks left in {tasks!r} (all were training tasks?)")
            include = tuple(x.strip() for x in only.split(",") if x.strip()) or ("model", "teacher", "random",
                                                                                 "majority")
            rows, _ = evaluate(policy, task_list, teacher=teacher, episodes=episodes, seed=seed,
                               concurrency=concurrency, include=include, llm=llm)
        except (TaskSpecError, ManifestError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        if as_json:
            import json
            from dataclasses import asdict

            typer.echo(json.dumps([{"label": r.label, "spec": r.spec, "decision_ms": r.decision_ms,
                                    **asdict(r.summary)} for r in rows], indent=1))
            return
        typer.echo(f"{len(task_list)} tasks x {episodes} episodes, SIMULATED agent world (llm backend sim), "
                   f"world {world}\n")
        if markdown:
            typer.echo(format_rows(rows))
            return
        from cluster.commands.tables import print_table
        from rollout.loop.report import HEADERS, summary_row

        print_table("", HEADERS, [summary_row(r.summary) for r in rows], wide=wide)
        for r in rows:
            typer.echo(f"{r.label}: {r.spec}; mean non-rule decision latency {r.decision_ms:.2f} ms")

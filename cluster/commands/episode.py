"""`halo episode`: run one refinement-loop episode and print its step-by-step trace."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def episode(
        task: str = typer.Option(..., "--task", help="task ID, e.g. planbench/blocksworld/instance-2"),
        tasks: str = typer.Option("bundled", "--tasks", help="task spec to look the ID up in"),
        policy: str = typer.Option("rules+scripted", "--policy", help="random | scripted | rules+scripted | ..."),
        llm: str = typer.Option("sim", "--llm", help="sim[:world=FILE] (the simulated agent world)"),
        seed: int = typer.Option(0, "--seed"),
        max_steps: int = typer.Option(10, "--max-steps"),
        as_json: bool = typer.Option(False, "--json", help="print the episode record as JSON"),
    ) -> None:
        """Run one episode; print which agent ran at each step, why, and what the solvers said."""
        from dataclasses import asdict

        from rollout.loop.episode import EpisodeConfig, run_episode_sync
        from rollout.policies import PolicySpecError, make_policy
        from rollout.sim.backend import SimAgents
        from rollout.sim.spec import is_sim_spec, sim_config_for
        from rollout.tasks import TaskSpecError, find_task

        if not is_sim_spec(llm):
            raise typer.BadParameter("only --llm sim[:world=FILE] is available from this command; real backends "
                                     "run through the rollout driver with an endpoint configured", param_hint="--llm")
        try:
            sim = sim_config_for(llm)
            the_task = find_task(task, tasks)
            the_policy = make_policy(policy, seed=seed)
        except (TaskSpecError, PolicySpecError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        from cluster.preflight import check_policy_services

        check_policy_services(policy)  # a student service that does not answer: one line, exit 3
        record = run_episode_sync(the_task, the_policy, EpisodeConfig(max_steps=max_steps, seed=seed,
                                                                       backend=SimAgents(sim)))
        if as_json:
            typer.echo(json.dumps(asdict(record), indent=2))
            return
        typer.echo(format_trace(record))
        if record.infra_error:  # not an outcome of the policy: say what failed
            from cluster.errors import Unreachable

            raise Unreachable(f"infrastructure failure, not an outcome: {record.infra_error.splitlines()[0]}")
        raise typer.Exit(0 if record.success_validator else 1)


def format_trace(record) -> str:  # noqa: ANN001  (an EpisodeRecord; imported lazily)
    from rollout.core.state import EpisodeState

    lines = [f"episode {record.episode_id}  task {record.task_id}  policy {record.policy_name}  "
             f"llm_backend={record.llm_backend}  seed {record.seed}"]
    if record.steps:
        first = EpisodeState.from_json(record.steps[0].state_json)
        start = "empty domain" if not first.domain.strip() else (
            f"drafted PDDL, {'plan valid' if first.plan_valid else first.error_category or 'no plan'}")
        lines.append(f"start: {start}")
    for s in record.steps:
        result = "VALID" if s.plan_valid else (s.error_category or "-")
        lines.append(f"[{s.step:2d}] {s.agent_id:2d} {s.agent_name:<26} by {s.decided_by:<8} "
                     f"({s.decision_reason})")
        detail = f"     -> {result}; plan found: {s.plan_found}; agent: {'ok' if s.agent_ok else 'FAILED'} "
        detail += f"- {s.agent_message}" if s.agent_message else ""
        if s.llm_calls:
            detail += f"  [{s.llm_calls} LLM call, {s.tokens_in}+{s.tokens_out} tok, ${s.cost_usd:.4f}]"
        lines.append(detail)
    oracle = "n/a" if record.success_oracle is None else str(record.success_oracle)
    lines.append(f"validator success: {record.success_validator}  oracle success: {oracle}  "
                 f"steps: {len(record.steps)}  LLM calls: {record.total_llm_calls}  "
                 f"cost: ${record.total_cost_usd:.4f}  wall: {record.wall_s:.2f}s")
    if record.final_plan:
        lines.append("final plan:\n" + record.final_plan.rstrip())
    if record.natural_language_plan:
        lines.append("in words:\n" + record.natural_language_plan)
    if record.error:
        lines.append(f"ERROR: {record.error}")
    return "\n".join(lines)

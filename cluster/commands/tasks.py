"""`halo tasks generate|list|show`: generated task sets (rollout/tasks/generators)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from rollout.tasks.generators.pipeline import GenerateRequest, JobStats

tasks_app = typer.Typer(help="Generated planning tasks: generators, difficulty levels, task sets.",
                        no_args_is_help=True)


@tasks_app.command("list")
def list_generators() -> None:
    """The generators, their knobs (with bounds) and the knob ranges of each difficulty level."""
    from rich.console import Console
    from rich.table import Table

    from rollout.tasks.generators import PRESETS, REGISTRY, get_generator

    table = Table("generator", "what", "knobs (bounds)", "levels (knob ranges)", title="task generators")
    for name in REGISTRY:
        gen = get_generator(name)
        knobs = "\n".join(f"{k.name} ({k.lo}..{k.hi}): {k.help}" for k in gen.knobs)
        levels = "\n".join(f"{lv}: " + " ".join(f"{k}={a}" if a == b else f"{k}={a}-{b}" for k, (a, b) in r.items())
                           for lv, r in gen.levels.items())
        table.add_row(name, gen.summary, knobs, levels)
    Console(width=200).print(table)
    for name, parts in PRESETS.items():
        typer.echo(f"preset {name}: " + ", ".join(f"{d} {'/'.join(lv)}" for d, lv in parts) + " (30 tasks per level)")
    typer.echo("preset classical-paper: blocksworld easy/medium/hard by optimal plan length 2-4/6-8/10-12, hanoi "
               "easy..extreme by 3-6 discs (30 per level), childsnack and floortile 19 each")
    typer.echo("natural_plan[:KIND+KIND]: trip_planning, meeting_planning, calendar_scheduling; "
               "levels easy/medium/hard")


@tasks_app.command()
def generate(
    domain: str = typer.Argument(..., help="generator name, a comma list, 'all', a preset (classical), "
                                                  "classical-paper, or natural_plan[:KIND+KIND]"),
    out: str = typer.Option(..., "--out", help="the set's directory (tasks are added when it exists)"),
    count: int = typer.Option(None, "--count", help="gold tasks per domain and level (default 100; 30 for presets)"),
    seed: int = typer.Option(0, "--seed"),
    difficulty: str = typer.Option(None, "--difficulty", help="easy|medium|hard|extreme, a comma list, or all "
                                                              "(default medium)"),
    size: str = typer.Option(None, "--size", help="knob overrides key=value,... (the level becomes 'custom')"),
    timeout_s: float = typer.Option(10.0, "--time-limit", help="planner limit per task (s); unsolved within it "
                                                              "is never emitted"),
    address: str = typer.Option(None, "--address", help="verify on this Ray cluster"),
    ray_mode: str = typer.Option("auto", "--ray", help="auto (Ray from 200 tasks), on, off"),
) -> None:
    """Generate verified tasks: gold PDDL, statements, validated gold plans, difficulty measures."""
    if domain.split(":")[0] == "natural_plan":
        from cluster.commands.tasks_natural_plan import generate_natural_plan

        generate_natural_plan(domain, out, count, seed, difficulty)
        return
    if domain == "classical-paper":
        from cluster.commands.tasks_natural_plan import generate_classical_paper

        generate_classical_paper(out, count, seed, difficulty)
        return
    if ray_mode not in ("auto", "on", "off"):
        raise typer.BadParameter("choose auto, on or off", param_hint="--ray")
    req = generate_request(domain, out, count, seed, difficulty, size, timeout_s, address, ray_mode)
    run_generate(req)


def generate_request(domain: str, out: str, count: int | None, seed: int, difficulty: str | None, size: str | None,
                     timeout_s: float, address: str | None, ray_mode: str) -> GenerateRequest:
    """The generation request from the command's options, or one line and exit 2."""
    from rollout.tasks.generators import PRESETS, GeneratorError
    from rollout.tasks.generators.base import parse_sizes
    from rollout.tasks.generators.pipeline import GenerateRequest, expand

    try:
        # no level and no sizes: the medium level; sizes alone: level "custom" (medium ranges under them)
        jobs = expand(domain, difficulty or (None if size or domain in PRESETS else "medium"))
        default_count = 30 if domain in PRESETS else 100
        return GenerateRequest(jobs=jobs, count=default_count if count is None else count, seed=seed, out=out,
                               overrides=parse_sizes(size), timeout_s=timeout_s, address=address,
                               use_ray={"auto": None, "on": True, "off": False}[ray_mode])
    except GeneratorError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


class _Progress:
    """One line per (domain, level) job at most every 5 s, and one when it is done."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, s: JobStats) -> None:
        import time

        now = time.monotonic()
        if s.gold < s.wanted and now - self.last < 5.0:
            return
        self.last = now
        rate = s.gold / s.wall_s if s.wall_s else 0.0
        typer.echo(f"  {s.domain}/{s.level}: {s.gold}/{s.wanted} gold, {s.duplicates} duplicates, "
                   f"rejected {dict(s.rejected) or 'none'}, {rate:.1f} tasks/s", err=True)


def run_generate(req: GenerateRequest) -> None:
    """Generate (on Ray when the request wants it) and say where the tasks are."""
    import time

    from rollout.tasks.generators import GeneratorError
    from rollout.tasks.generators.genset import GenSetError
    from rollout.tasks.generators.pipeline import generate as run
    from rollout.tasks.generators.pipeline import wants_ray

    handle = None
    try:
        if wants_ray(req):
            from cluster.ray_cluster import start_or_join

            handle = start_or_join(req.address)
        t0 = time.monotonic()
        stats = run(req, _Progress())
    except (GeneratorError, GenSetError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except KeyboardInterrupt as exc:
        typer.echo(f"interrupted: the (domain, level) jobs already finished are in {req.out}", err=True)
        raise typer.Exit(130) from exc
    finally:
        if handle is not None:
            from cluster.ray_cluster import shutdown

            shutdown(handle)
    total = sum(s.gold for s in stats)
    typer.echo(f"{total} gold tasks in {time.monotonic() - t0:.1f}s -> {req.out} (use --tasks gen:{req.out})")


@tasks_app.command()
def show(folder: str = typer.Argument(..., help="a generated set's directory")) -> None:
    """Tasks per domain and level in a set, with median plan length and planner time."""
    from statistics import median

    from rich.console import Console
    from rich.table import Table

    from rollout.tasks.generators import LEVELS
    from rollout.tasks.generators.genset import GenSetError, read_index

    try:
        rows = read_index(folder)
    except GenSetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["domain"], r["level"]), []).append(r)
    order = {lv: i for i, lv in enumerate((*LEVELS, "custom"))}
    table = Table("domain", "level", "tasks", "median objects", "median plan length", "median planner CPU (s)",
                  "median expansions", "seeds", title=f"{folder}: {len(rows)} gold tasks")
    for (dom, lv), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))):
        table.add_row(dom, lv, str(len(rs)), f"{median(r['objects'] for r in rs):g}",
                      f"{median(r['plan_length'] for r in rs):g}", f"{median(r['planner_cpu_s'] for r in rs):.3f}",
                      f"{median(r['expansions'] for r in rs):g}", ",".join(sorted({str(r['seed']) for r in rs})))
    Console(width=160).print(table)


@tasks_app.command()
def score(
    file: str = typer.Argument(..., help="a Natural Plan data file (trip, meeting or calendar JSON)"),
    field: str = typer.Option("pred_5shot_pro", "--field", help="the answer field scored against golden_plan"),
    as_json: bool = typer.Option(False, "--json", help="print {task, n, correct, accuracy, by_bucket}"),
) -> None:
    """Score a Natural Plan file's answers exactly as the benchmark's evaluation scripts do."""
    from cluster.commands.tasks_score import run_score

    run_score(file, field, as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")

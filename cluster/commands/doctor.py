"""`halo doctor`: which planners, validators and sandbox this machine has, and what is missing."""

from __future__ import annotations

import json

import typer

# What is not a planner: the sandbox and the cluster runtime. Planners and validators say
# themselves how they are installed and whether they are required (solvers.planners).
RUNTIME_INSTALL = {
    "bwrap": "apt-get install -y bubblewrap",
    "ray": "pip install 'ray[serve,train,data]==2.60.0'",
}


def install_hints() -> tuple[dict[str, str], tuple[str, ...]]:
    """Label -> install command of everything doctor looks for, and the labels it requires."""
    from solvers.planners import planners

    found = planners()
    hints = {p.label: p.install for p in found if p.install}
    return {**hints, **RUNTIME_INSTALL}, tuple(p.label for p in found if p.required)


def _smoke_test() -> tuple[bool, str]:
    """One tiny solve + validate through the sandbox, so 'found' also means 'works'."""
    import solvers

    domain = ("(define (domain d) (:requirements :strips) (:predicates (at ?x) (link ?x ?y))"
              " (:action go :parameters (?x ?y) :precondition (and (at ?x) (link ?x ?y))"
              " :effect (and (at ?y) (not (at ?x)))))")
    problem = "(define (problem p) (:domain d) (:objects a b) (:init (at a) (link a b)) (:goal (at b)))"
    result = solvers.plan(domain, problem, limits=solvers.Limits(timeout_s=30))
    if not result.ok:
        return False, f"plan: {result.category.value} {result.message[:200]}"
    verdict = solvers.validate(domain, problem, result.plan_text, limits=solvers.Limits(timeout_s=30))
    if not verdict.valid:
        return False, f"validate: {verdict.category.value} {verdict.message[:200]}"
    return True, f"solve+validate ok in {(result.wall_s + verdict.wall_s) * 1000:.0f} ms (sandbox {result.sandbox})"


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
        """Print planner/validator versions, the sandbox level, Ray and Python, and what is missing."""
        import solvers

        found = solvers.versions()
        install, required = install_hints()
        missing = {name: cmd for name, cmd in install.items() if name not in found}
        level = found.get("sandbox", "rlimits")
        if level != "bwrap" and "bwrap" in found:
            missing["bwrap"] = "bwrap is installed but does not work here (user namespaces off?); calls use rlimits"
        works, smoke = _smoke_test() if all(name in found for name in required) else (False, "skipped")
        uses = {"temporal planner": solvers.temporal_planner(), "validator": solvers.validator_name()}
        if as_json:
            typer.echo(json.dumps({"found": found, "uses": uses, "missing": missing, "smoke_test": smoke,
                                   "ok": works}, indent=2))
        else:
            typer.echo("found:")
            for name, version in found.items():
                typer.echo(f"  {name:<16} {version}")
            typer.echo("uses:")
            for role, name in uses.items():
                typer.echo(f"  {role:<16} {name}")
            typer.echo(f"smoke test:        {smoke}")
            if missing:
                typer.echo("missing:")
                for name, cmd in missing.items():
                    typer.echo(f"  {name:<16} {cmd}")
        solvers.shutdown()
        raise typer.Exit(0 if works else 1)

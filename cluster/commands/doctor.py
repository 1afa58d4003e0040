"""`halo doctor`: which planners, validators and sandbox this machine has, and what is missing."""

from __future__ import annotations

import json

import typer

INSTALL = {
    "fast-downward": "pip install up-fast-downward==1.0.0",
    "kairos": "pip install kairos-planner==1.0.6",
    "bwrap": "apt-get install -y bubblewrap",
    "ray": "pip install 'ray[serve,train,data]==2.60.0'",
    "popf": "optional (Kairos plans temporal tasks without it): build it, see k8s/images/build-planners.sh",
    "val": "optional (Kairos validates without it): build VAL from source, see k8s/images/build-planners.sh",
}
REQUIRED = ("fast-downward", "kairos")


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
        missing = {name: cmd for name, cmd in INSTALL.items() if name not in found}
        level = found.get("sandbox", "rlimits")
        if level != "bwrap" and "bwrap" in found:
            missing["bwrap"] = "bwrap is installed but does not work here (user namespaces off?); calls use rlimits"
        works, smoke = _smoke_test() if all(name in found for name in REQUIRED) else (False, "skipped")
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

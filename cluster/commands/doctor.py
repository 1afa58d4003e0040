"""`halo doctor`: which planners, validators and sandbox this machine has, and what is missing."""

from __future__ import annotations

import json
import time

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


CLASSICAL = (
    "(define (domain d) (:requirements :strips) (:predicates (at ?x) (link ?x ?y))"
    " (:action go :parameters (?x ?y) :precondition (and (at ?x) (link ?x ?y))"
    " :effect (and (at ?y) (not (at ?x)))))",
    "(define (problem p) (:domain d) (:objects a b) (:init (at a) (link a b)) (:goal (at b)))",
    "(go a b)\n",
)
# Two dependent durative actions 0.001 apart, as POPF and Kairos space them: a validator at another
# tolerance (VAL's default 0.01) rejects the plan, and the smoke test says so.
TEMPORAL = (
    "(define (domain t) (:requirements :durative-actions) (:predicates (a) (b) (c))"
    " (:durative-action go :parameters () :duration (= ?duration 2) :condition (at start (a))"
    " :effect (and (at start (not (a))) (at end (b))))"
    " (:durative-action finish :parameters () :duration (= ?duration 1) :condition (at start (b))"
    " :effect (at end (c))))",
    "(define (problem q) (:domain t) (:init (a)) (:goal (c)))",
    "0.000: (go) [2.000]\n2.001: (finish) [1.000]\n",
)
TASKS = {"classical": CLASSICAL, "temporal": TEMPORAL}


def _smoke_one(planner, kind: str) -> str | None:  # noqa: ANN001  (a solvers.planners.Planner)
    """One smoke test of one tool on one kind of task: None when it passes, else what failed."""
    import solvers

    domain, problem, plan = TASKS[kind]
    limits = solvers.Limits(timeout_s=30)
    if planner.roles & {"classical", "temporal"} and kind in planner.roles:
        result = solvers.plan(domain, problem, planner=planner.name, limits=limits)
        if not result.ok:
            return f"{planner.name} {kind} plan: {result.category.value} {result.message[:200]}"
        plan = result.plan_text
    if "validator" in planner.roles:
        verdict = solvers.validate(domain, problem, plan, limits=limits, validator=planner.name)
        if not verdict.valid:
            return f"{planner.name} {kind} validate: {verdict.category.value} {verdict.message[:200]}"
    return None


def _smoke_test() -> tuple[bool, str, dict[str, str]]:
    """A classical and a temporal task through the sandbox with every installed planner and
    validator, so 'found' also means 'works' for each (and the plans also pass the validator in
    force)."""
    import solvers
    from solvers.planners import planners

    t0 = time.monotonic()
    report: dict[str, str] = {}
    failing: list[str] = []  # the planners whose smoke test failed (decided here, not read back from the text)
    for planner in planners():
        if not planner.available():
            continue
        kinds = [k for k in TASKS if k in planner.roles or "validator" in planner.roles]
        failures = [f for f in (_smoke_one(planner, kind) for kind in kinds) if f]
        report[planner.name] = "; ".join(failures) if failures else f"ok ({', '.join(kinds)})"
        if failures:
            failing.append(planner.name)
    fd = solvers.plan(*CLASSICAL[:2], limits=solvers.Limits(timeout_s=30))
    sandbox = fd.sandbox or solvers.sandbox_level()
    failed = [f"{name}: {report[name]}" for name in failing]
    if failed:
        return False, " | ".join(failed), report
    took = (time.monotonic() - t0) * 1000
    return True, f"solve+validate ok for {', '.join(report)} in {took:.0f} ms (sandbox {sandbox})", report


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
        works, smoke, each = _smoke_test() if all(name in found for name in required) else (False, "skipped", {})
        uses = {"temporal planner": solvers.temporal_planner(), "validator": solvers.validator_name()}
        if as_json:
            typer.echo(json.dumps({"found": found, "uses": uses, "missing": missing, "smoke_test": smoke,
                                   "smoke_tests": each, "ok": works}, indent=2))
        else:
            typer.echo("found:")
            for name, version in found.items():
                typer.echo(f"  {name:<16} {version}")
            typer.echo("uses:")
            for role, name in uses.items():
                typer.echo(f"  {role:<16} {name}")
            typer.echo(f"smoke test:        {smoke}")
            for name, text in each.items():
                typer.echo(f"  {name:<16} {text}")
            if missing:
                typer.echo("missing:")
                for name, cmd in missing.items():
                    typer.echo(f"  {name:<16} {cmd}")
        solvers.shutdown()
        raise typer.Exit(0 if works else 1)

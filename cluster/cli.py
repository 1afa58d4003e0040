"""The `halo` command line. Each command group lives in its own module under
cluster/commands/ and registers itself on the app; heavy imports stay inside the commands."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

# Run without typer or the other commands' imports, so a one-shot call starts fast.
FAST_COMMANDS = ("solve", "validate")

# One module per command group; each exposes `register(app: typer.Typer) -> None`.
COMMAND_MODULES = (
    "cluster.commands.solve",
    "cluster.commands.doctor",
    "cluster.commands.serve",
    "cluster.commands.episode",
    "cluster.commands.report",
    "cluster.commands.rollout",
    "cluster.commands.loop",
    "cluster.commands.dataset",
    "cluster.commands.train",
    "cluster.commands.eval",
    "cluster.commands.tasks",
    "cluster.commands.sim",
)



def _build_app() -> Any:
    import typer

    app = typer.Typer(add_completion=False, no_args_is_help=True, help="HALO cluster: verified plans at scale.",
                      pretty_exceptions_enable=False, rich_markup_mode=None)  # errors: one plain line

    @app.callback()
    def _root(
        debug: bool = typer.Option(False, "--debug", help="print the full trace of an error (anywhere on the line)"),
        version: bool = typer.Option(False, "--version", help="print the version and exit"),
    ) -> None:
        """HALO cluster: natural-language planning problems to verified plans at scale.

        Exit codes: 0 done, 1 failed, 2 bad arguments, 3 unreachable dependency, 4 run busy, 130 interrupted."""

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(app)
    return app


def __getattr__(name: str) -> Any:
    """`cluster.cli.app` (the typer app) is built on first use."""
    if name == "app":
        app = globals()["app"] = _build_app()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _version() -> str:
    from cluster.config import project_version

    return project_version()


def main() -> None:
    """The `halo` entry point: every error that reaches it is one line and a documented exit code
    (cluster/errors.py); `--debug` anywhere on the line, or HALO_DEBUG=1, shows the trace."""
    if "--debug" in sys.argv[1:]:
        sys.argv.remove("--debug")
        os.environ["HALO_DEBUG"] = "1"
    if sys.argv[1:2] in (["--version"], ["-V"]):
        print(f"halo {_version()}")
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] in FAST_COMMANDS:
        from cluster.commands import solve_cli

        sys.exit(solve_cli.one_shot(sys.argv[1], sys.argv[2:]))
    try:
        __getattr__("app")()
    except SystemExit as done:
        if sys.argv[1:2] == ["rollout"]:
            _exit_now(done.code)
        raise
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001  (the one place that turns errors into answers)
        if os.environ.get("HALO_DEBUG") == "1":
            raise
        from cluster.errors import classify

        code, line = classify(exc)
        print(f"error: {line}", file=sys.stderr)
        sys.exit(code)


def _exit_now(code: object) -> None:
    """End a finished `halo rollout` without interpreter teardown: Ray is shut down and the report
    printed; at teardown, an Arrow I/O thread still releasing a Python-backed file (deltalake's
    filesystem) could take the GIL from a finalizing interpreter and abort the process (rc 134)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


if __name__ == "__main__":
    main()

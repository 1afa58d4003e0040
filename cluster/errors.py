"""Exit codes of every `halo` command and the one-line answer to each known error.

    0    done
    1    the job ran and failed (its reason is printed), or an unexpected error
    2    bad arguments or spec (a policy, task, LLM or store spec; an unknown run)
    3    a dependency is unreachable or refused us (LLM endpoint, student service, store, planners)
    4    busy: another process writes this run (its lease is live)
    130  interrupted (Ctrl-C or SIGTERM); re-running the same command resumes

`cluster.cli.main` turns any exception that reaches it into one line and one of these codes;
`--debug` (anywhere on the command line) or HALO_DEBUG=1 shows the full trace instead.
"""

from __future__ import annotations

import os
import sys
import traceback

# typer 0.29 carries its own copy of click: its exceptions are the ones its commands handle.
from typer._click.exceptions import ClickException

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_BUSY = 4
EXIT_INTERRUPTED = 130


class HaloError(ClickException):
    """An error with a known exit code; its message is the whole answer (one line, with the fix).
    A click exception, so the command line prints it and exits with its code wherever it is raised."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.exit_code = type(self).exit_code

    def show(self, file: object = None) -> None:
        if os.environ.get("HALO_DEBUG") == "1":
            traceback.print_exception(self, file=file or sys.stderr)  # type: ignore[arg-type]
        print(f"error: {self.format_message()}", file=file or sys.stderr)  # type: ignore[arg-type]


class UsageError(HaloError):
    exit_code = EXIT_USAGE


class Unreachable(HaloError):
    exit_code = EXIT_UNREACHABLE


class Busy(HaloError):
    exit_code = EXIT_BUSY


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def classify(exc: BaseException) -> tuple[int, str]:
    """(exit code, one line) for any exception a command let through."""
    from rollout.core.infra import infra_reason
    from rollout.store import StoreUnavailable
    from rollout.store.lease import LeaseHeld

    if isinstance(exc, HaloError):
        return exc.exit_code, _first_line(exc)
    if isinstance(exc, LeaseHeld):
        return EXIT_BUSY, _first_line(exc)
    if isinstance(exc, StoreUnavailable):
        return EXIT_UNREACHABLE, f"the store is unreachable: {_first_line(exc)}"
    if infra_reason(exc):
        return EXIT_UNREACHABLE, infra_reason(exc).splitlines()[0]
    if _is_credentials_error(exc):
        return EXIT_UNREACHABLE, (f"no usable S3 credentials ({_first_line(exc)}): set AWS_ACCESS_KEY_ID and "
                                  "AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for MinIO)")
    if _is_spec_error(exc):
        return EXIT_USAGE, _first_line(exc)
    return EXIT_FAILED, (f"unexpected {type(exc).__name__}: {_first_line(exc)} "
                         "(re-run with --debug for the full trace)")


def _is_credentials_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    text = str(exc)
    return bool(names & {"NoCredentialsError", "PartialCredentialsError"}) or (
        isinstance(exc, OSError) and ("credentials" in text.lower() or "InvalidAccessKeyId" in text))


def _is_spec_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & SPEC_ERRORS)


# Errors that mean "what you asked for is wrong" (exit 2), by class name: the classes live in
# every layer, and importing them all here would cost every command their imports.
SPEC_ERRORS = frozenset({"SpecError", "PolicySpecError", "TaskSpecError", "SimSpecError", "BudgetError", "GenSetError",
                         "GeneratorError", "DatasetError", "EmptyDatasetError", "ManifestError", "PipelineError",
                         "LabelError", "LoopConfigError", "ConfigError", "KeyConfigError", "BadParameter"})

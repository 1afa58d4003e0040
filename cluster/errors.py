"""Exit codes of every `halo` command and the one-line answer to each known error.

    0    done
    1    the job ran and failed (its reason is printed), or an unexpected error
    2    bad arguments or spec (a policy, task, LLM or store spec; an unknown run)
    3    a dependency is unreachable or refused us (LLM endpoint, student service, store, planners)
    4    busy: another process writes this run (its lease is live)
    130  interrupted (Ctrl-C or SIGTERM); re-running the same command resumes

Errors are classes of the one hierarchy in `solvers/errors.py` (input, infra, busy); this module
maps them to the codes. `cluster.cli.main` turns any exception that reaches it into one line and
one of these codes; `--debug` (anywhere on the command line) or HALO_DEBUG=1 shows the full trace instead.
"""

from __future__ import annotations

import os
import sys
import traceback

# typer 0.29 carries its own copy of click: its exceptions are the ones its commands handle.
from typer._click.exceptions import BadParameter, ClickException

from solvers.errors import BusyError, HaloError, InfraError, InputError, infra_reason

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_BUSY = 4
EXIT_INTERRUPTED = 130

# The one hierarchy (solvers/errors.py), cause -> exit code; the first match in this order wins.
EXIT_CODES: tuple[tuple[type[HaloError], int], ...] = (
    (BusyError, EXIT_BUSY), (InfraError, EXIT_UNREACHABLE), (InputError, EXIT_USAGE), (HaloError, EXIT_FAILED))


def exit_code_of(exc: HaloError) -> int:
    return next(code for cls, code in EXIT_CODES if isinstance(exc, cls))


class CliError(HaloError, ClickException):
    """An error a command raises with its whole answer (one line, with the fix). A click exception,
    so the command line prints it and exits with the code of its cause wherever it is raised."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code_of(self)

    def show(self, file: object = None) -> None:
        if os.environ.get("HALO_DEBUG") == "1":
            traceback.print_exception(self, file=file or sys.stderr)  # type: ignore[arg-type]
        print(f"error: {self.format_message()}", file=file or sys.stderr)  # type: ignore[arg-type]


class UsageError(InputError, CliError):
    """Bad arguments or spec (exit 2)."""


class Unreachable(InfraError, CliError):
    """A dependency is unreachable or refused us (exit 3)."""

    kind = "preflight"


class Busy(BusyError, CliError):
    """Another process writes the run (exit 4)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def classify(exc: BaseException) -> tuple[int, str]:
    """(exit code, one line) for any exception a command let through: by its class in the one
    hierarchy; outside it, the few third-party errors we know, else "unexpected"."""
    from rollout.store import StoreUnavailable

    if isinstance(exc, CliError):
        return exc.exit_code, _first_line(exc)
    if isinstance(exc, StoreUnavailable):
        return EXIT_UNREACHABLE, f"the store is unreachable: {_first_line(exc)}"
    if isinstance(exc, BusyError):
        return EXIT_BUSY, _first_line(exc)
    if infra_reason(exc):
        return EXIT_UNREACHABLE, infra_reason(exc).splitlines()[0]
    if _is_credentials_error(exc):
        return EXIT_UNREACHABLE, (f"no usable S3 credentials ({_first_line(exc)}): set AWS_ACCESS_KEY_ID and "
                                  "AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for MinIO)")
    if isinstance(exc, InputError | BadParameter):
        return EXIT_USAGE, _first_line(exc)
    if isinstance(exc, HaloError):
        return exit_code_of(exc), _first_line(exc)
    return EXIT_FAILED, (f"unexpected {type(exc).__name__}: {_first_line(exc)} "
                         "(re-run with --debug for the full trace)")


def _is_credentials_error(exc: BaseException) -> bool:
    """botocore's credential errors by class name (botocore is not imported for this); pyarrow's
    S3 errors are plain OSErrors whose text is the only thing that tells them apart."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    text = str(exc)
    return bool(names & {"NoCredentialsError", "PartialCredentialsError"}) or (
        isinstance(exc, OSError) and ("credentials" in text.lower() or "InvalidAccessKeyId" in text))

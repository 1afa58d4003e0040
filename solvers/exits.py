"""How an external program ended, read before its output is: a program that could not start or
died says nothing about the task.

`tool_failure(run, program)` answers the category and message when the run is such a failure
(the worker failed, the wall-clock or CPU limit, a signal, exit 126/127, the loader refused a
library, nothing printed), and None when the program ran and its report should be read.
"""

from __future__ import annotations

import re
import signal

from solvers.results import ErrorCategory
from solvers.sandbox import RunResult

EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
_LOADER_ERROR = re.compile(r"error while loading shared libraries|cannot open shared object file|"
                           r"symbol lookup error|version `[^']+' not found|cannot execute", re.I)
_MEMORY = re.compile(r"bad_alloc|out of memory|cannot allocate memory", re.I)


def own_words(output: str, lines: int = 3, limit: int = 400) -> str:
    """The program's last non-empty lines: what it said when it failed."""
    said = [line.strip() for line in output.splitlines() if line.strip()]
    return " | ".join(said[-lines:])[-limit:]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _died(run: RunResult, program: str) -> tuple[ErrorCategory, str]:
    sig = -(run.returncode or 0)
    if sig == signal.SIGXCPU:
        return ErrorCategory.SEARCH_TIMEOUT, f"{program} hit the CPU-time limit"
    said = own_words(run.output)
    if _MEMORY.search(run.output[-4000:]):
        return ErrorCategory.MEMORY_LIMIT, f"{program} ran out of memory ({_signal_name(sig)}): {said}"
    return ErrorCategory.SOLVER_CRASH, f"{program} died on {_signal_name(sig)}" + (f": {said}" if said else "")


def tool_failure(run: RunResult, program: str, *, silent_ok: bool = False) -> tuple[ErrorCategory, str] | None:
    """(category, message) when `run` failed as a program rather than answering; None otherwise.
    `silent_ok`: an empty output with exit 0 is an answer for this program."""
    if run.returncode is None:
        if run.timed_out:
            return ErrorCategory.SEARCH_TIMEOUT, f"{program} hit the wall-clock limit"
        return ErrorCategory.SOLVER_CRASH, f"{program} could not be run: {run.error or 'the worker failed'}"
    if run.timed_out:
        return ErrorCategory.SEARCH_TIMEOUT, f"{program} hit the wall-clock limit"
    if run.returncode < 0:
        return _died(run, program)
    loader = _LOADER_ERROR.search(run.output)
    if run.returncode in (EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND) or (loader and run.returncode != 0):
        said = own_words(run.output) or "no message"
        return ErrorCategory.SOLVER_CRASH, f"{program} could not start (exit code {run.returncode}): {said}"
    if not run.output.strip() and not (silent_ok and run.returncode == 0):
        return ErrorCategory.SOLVER_CRASH, f"{program} printed nothing (exit code {run.returncode})"
    return None

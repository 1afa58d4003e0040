"""The one error hierarchy of the project: every error it raises on purpose is a `HaloError`.

The children say what caused it, and the edges map the cause to an answer (never the message
text): the command line to an exit code (`cluster/errors.py`), the decision service to an HTTP
status (`serve/errors.py`).

    HaloError        an error raised on purpose; on its own: the job ran and failed (exit 1, HTTP 500)
    ├── InputError   what was asked for is wrong: a spec, a file, a request (exit 2, HTTP 422)
    ├── InfraError   a dependency failed: LLM endpoint, student service, store, planner (exit 3, HTTP 503)
    └── BusyError    someone else holds what this needs: a run's lease, a slot (exit 4, HTTP 409)

Each class here keeps the built-in base it had before (a spec error is still a ValueError, a
store error still a RuntimeError), so no existing `except` changes meaning.

`HaloError.infra_reason()` answers "did a dependency fail?" for the records: "kind: message"
when it did, "" when not. An episode whose exception has a reason is not an outcome
(`rollout/core/infra.py`); the exception decides, so the classifier needs no import of the
layer that raises it.

`count_handled(where, exc)` is the convention for a broad handler that neither re-raises nor
logs: it counts the exception by place and type (`handled_counts()`), and logs it at debug
level; `tests/test_broad_except.py` holds every broad handler to it.
"""

from __future__ import annotations

import threading
from collections import Counter

INFRA_REASON_LIMIT = 500  # characters of an infra reason kept in a record


class HaloError(Exception):
    """An error the project raises on purpose; its message is the whole answer (one line, with the fix)."""

    def infra_reason(self) -> str:
        """"kind: message" when a dependency failed, "" when the error is about the work itself."""
        return ""

    def __reduce__(self) -> tuple[object, ...]:
        # Whole across processes (Ray): the fields (kind, status, category, ...) travel too, whatever
        # the subclass's __init__ takes.
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls: type[HaloError], args: tuple[object, ...], fields: dict[str, object]) -> HaloError:
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(fields)
    return exc


class InputError(HaloError):
    """What was asked for is wrong (a spec, a file, a request): fix the input and ask again."""


class InfraError(HaloError):
    """A dependency failed past its retries. `kind` is a short stable tag (llm:connection_error,
    student:unreachable, solver_unavailable, store, ...) for counters and records."""

    kind = "infra"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind

    def infra_reason(self) -> str:
        return f"{self.kind}: {_message(self)}"[:INFRA_REASON_LIMIT]


class BusyError(HaloError):
    """Another process holds what this needs (a run's lease): wait or stop it, then ask again."""


def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if exc.args else ""


def infra_reason(exc: BaseException) -> str:
    """The exception's own answer to "did a dependency fail?"; "" for any exception not ours."""
    return exc.infra_reason() if isinstance(exc, HaloError) else ""


_handled: Counter[tuple[str, str]] = Counter()
_handled_lock = threading.Lock()


def count_handled(where: str, exc: BaseException) -> None:
    """Count (and log at debug level) an exception a broad handler turned into an answer."""
    with _handled_lock:
        _handled[(where, type(exc).__name__)] += 1
    import logging  # here, not at the top: a one-shot `halo solve` imports this module and no logging

    logging.getLogger(__name__).debug("%s handled %s: %s", where, type(exc).__name__, exc)


def handled_counts() -> dict[tuple[str, str], int]:
    """How many exceptions each broad handler of this process handled, by (place, type)."""
    with _handled_lock:
        return dict(_handled)

"""The decision service's answer to an error of the one hierarchy (`solvers/errors.py`): an HTTP
status and a stable `error` kind by the error's cause, never by its message.

    InputError  -> 422 invalid_request   (the request names something that is wrong)
    InfraError  -> 503 unavailable       (a dependency of the service failed; retry)
    BusyError   -> 409 conflict          (someone else holds what the request needs)
    HaloError   -> 500 internal          (the service failed on purpose, with its reason)

Routes that refuse on their own (`serve.app._refuse`) keep their more precise kinds.
"""

from __future__ import annotations

from solvers.errors import BusyError, HaloError, InfraError, InputError

# cause -> (status, error kind); the first match in this order wins.
HTTP_ANSWERS: tuple[tuple[type[HaloError], int, str], ...] = (
    (BusyError, 409, "conflict"), (InfraError, 503, "unavailable"), (InputError, 422, "invalid_request"),
    (HaloError, 500, "internal"))


def http_answer(exc: HaloError) -> tuple[int, str]:
    """(HTTP status, error kind) for an error of the hierarchy."""
    return next((status, kind) for cls, status, kind in HTTP_ANSWERS if isinstance(exc, cls))


def detail_of(exc: HaloError) -> str:
    """The error's first line: its whole answer, without a trace."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""Infrastructure failures: an episode that ended because something it depends on failed (the LLM
endpoint, the student decision service, the store, a solver program that cannot start), not
because the policy or the task did.

Such an episode says nothing about the policy, so it is never an outcome: the rollout job does
not commit it (the next resume of the run runs it again), reports count it in a column of their
own, dataset builders drop and count it, rewards leave it out. The episode record carries the
reason in `EpisodeRecord.infra_error` ("" for a real outcome); `rollout.core.trajectory.is_infra_failure`
tells the two apart.

`infra_reason(exc)` asks the exception (`solvers.errors.HaloError.infra_reason`): every
`solvers.errors.InfraError` (an LLM error, a solver tool failure, the store unavailable,
`InfraFailure`) has a reason, and so has a decision-service error that is not the service's
verdict on the request. Code that talks to a dependency raises `InfraFailure` (or lets the
dependency's own typed error through) past its retries, and the environment lets these through
instead of turning them into a failed step.
"""

from __future__ import annotations

import solvers.errors
from solvers.errors import InfraError


class InfraFailure(InfraError, RuntimeError):
    """A dependency failed past its retries. `kind` is a short stable tag (llm:connection_error,
    student:unreachable, solver_unavailable, store, ...) for counters and records."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message, kind=kind)

    def __str__(self) -> str:
        return f"{self.kind}: {super().__str__()}"


def infra_reason(exc: BaseException) -> str:
    """"kind: message" when `exc` is an infrastructure failure, "" when it is not: the exception
    answers itself (`HaloError.infra_reason`; the LLM, student-service and solver errors override it)."""
    return solvers.errors.infra_reason(exc)


def short_reason(infra_error: str) -> str:
    """The kind of an infra_error ("llm:connection_error"), for counters."""
    parts = infra_error.split(":", 2)
    return ":".join(parts[:2]) if parts[0] in ("llm", "student", "solver") and len(parts) > 1 else parts[0]

"""Typed errors of the LLM client. Callers catch `LLMError`; `kind` is a stable string for records."""

from __future__ import annotations

from solvers.errors import INFRA_REASON_LIMIT, InfraError

__all__ = ["LLMBadResponseError", "LLMConnectionError", "LLMError", "LLMRateLimitError", "LLMRequestError",
           "LLMServerError", "LLMTimeoutError"]


class LLMError(InfraError):
    """The LLM endpoint failed past its retries. `kind` is the LLM's own tag ("timeout", ...);
    the record says "llm:KIND: message"."""

    kind = "error"

    def __init__(self, message: str, *, attempts: int = 1, status: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status

    def infra_reason(self) -> str:
        return f"llm:{self.kind}: {self}"[:INFRA_REASON_LIMIT]


class LLMTimeoutError(LLMError):
    kind = "timeout"


class LLMRateLimitError(LLMError):
    kind = "rate_limited"


class LLMServerError(LLMError):
    kind = "server_error"


class LLMConnectionError(LLMError):
    kind = "connection_error"


class LLMBadResponseError(LLMError):
    """The endpoint answered 200 with a body that is not a usable chat completion."""

    kind = "bad_response"


class LLMRequestError(LLMError):
    """A non-retryable 4xx (bad request, auth, unknown model)."""

    kind = "request_error"

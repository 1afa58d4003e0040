"""What an LLM call is configured with and what it leaves behind, without the HTTP client.

`LLMConfig`, `ChatReply`, `CallRecord`, `prompt_sha256` and `CallLedger` live here so that code
that only records or prices calls (the simulated world, the simulated teacher, the LLM budget)
does not import `openai`: that import costs about 2 CPU-seconds, which a rollout worker in the
simulated world used to pay in the middle of its first job.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from rollout.llm.prices import PriceTable


@dataclass(frozen=True)
class LLMConfig:
    base_url: str
    model: str
    api_key: str = "none"
    timeout_s: float = 60.0
    max_attempts: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    max_retry_after_s: float = 60.0  # a longer Retry-After fails the call instead of stalling
    max_concurrency: int = 8
    temperature: float = 0.0
    max_tokens: int | None = None
    prices: PriceTable = field(default_factory=PriceTable)
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatReply:
    text: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    cost_usd: float
    model: str
    attempts: int


@dataclass(frozen=True)
class CallRecord:
    """One `chat` call (all its attempts), as kept for the trajectory record."""

    purpose: str
    model: str
    prompt_sha256: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    cost_usd: float
    status: str  # "ok" or an LLMError kind
    attempts: int
    started_at: float
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prompt_sha256(messages: list[dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


class CallLedger:
    """The calls a chat client made (its `_records`), for the episode's step records and cost totals."""

    _records: list[CallRecord]

    @property
    def records(self) -> list[CallRecord]:
        return list(self._records)

    def drain_records(self) -> list[CallRecord]:
        out, self._records = self._records, []
        return out

    def totals(self) -> dict[str, float]:
        recs = self._records
        return {"calls": len(recs), "tokens_in": sum(r.tokens_in for r in recs),
                "tokens_out": sum(r.tokens_out for r in recs), "cost_usd": sum(r.cost_usd for r in recs),
                "failed": sum(1 for r in recs if r.status != "ok")}

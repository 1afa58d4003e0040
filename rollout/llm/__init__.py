"""LLM access for rollouts: an OpenAI-compatible async client with retries, limits and accounting."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from rollout.llm.errors import *  # noqa: F403  the typed errors, as errors.__all__ lists them
from rollout.llm.errors import __all__ as _ERRORS
from rollout.llm.prices import Price, PriceTable
from rollout.llm.records import CallRecord, ChatReply, LLMConfig, prompt_sha256

if TYPE_CHECKING:
    from rollout.llm.client import OpenAIChatClient

__all__ = [
    *_ERRORS,
    "CallRecord",
    "ChatReply",
    "LLMConfig",
    "OpenAIChatClient",
    "Price",
    "PriceTable",
    "config_from_env",
    "prompt_sha256",
]


def config_from_env(model: str | None = None, base_url: str | None = None, **overrides) -> LLMConfig:
    """An LLMConfig from arguments, then HALO_LLM_* / OPENAI_* environment variables.

    HALO_LLM_BASE_URL (or OPENAI_BASE_URL), HALO_LLM_MODEL, HALO_LLM_API_KEY (or OPENAI_API_KEY),
    HALO_LLM_PRICES (a YAML price table), HALO_LLM_TIMEOUT_S, HALO_LLM_MAX_CONCURRENCY.
    """
    env = os.environ
    url = base_url or env.get("HALO_LLM_BASE_URL") or env.get("OPENAI_BASE_URL")
    name = model or env.get("HALO_LLM_MODEL")
    if not url:
        raise ValueError("no LLM endpoint: pass a base URL or set HALO_LLM_BASE_URL")
    if not name:
        raise ValueError("no LLM model: pass a model name or set HALO_LLM_MODEL")
    kwargs = dict(overrides)
    kwargs.setdefault("api_key", env.get("HALO_LLM_API_KEY") or env.get("OPENAI_API_KEY") or "none")
    if "prices" not in kwargs and env.get("HALO_LLM_PRICES"):
        kwargs["prices"] = PriceTable.from_yaml(env["HALO_LLM_PRICES"])
    if "timeout_s" not in kwargs and env.get("HALO_LLM_TIMEOUT_S"):
        kwargs["timeout_s"] = float(env["HALO_LLM_TIMEOUT_S"])
    if "max_concurrency" not in kwargs and env.get("HALO_LLM_MAX_CONCURRENCY"):
        kwargs["max_concurrency"] = int(env["HALO_LLM_MAX_CONCURRENCY"])
    return LLMConfig(base_url=url, model=name, **kwargs)


def __getattr__(name: str) -> Any:
    # The HTTP client is imported on first use: `openai` costs about 2 CPU-seconds to import, and
    # the simulated world (which imports this package for the budget) never needs it.
    if name == "OpenAIChatClient":
        from rollout.llm.client import OpenAIChatClient

        return OpenAIChatClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

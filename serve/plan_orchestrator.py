"""The served orchestrator inside the plan runner: the rules layer, then the model version the
registry targets (the one the replicas serve), decided in the runner's own process.

Measured first through a DeploymentHandle (every plan step a decision on the replicas): the fast
policy's features of a new (domain, problem) pair in an error state cost 2-50 ms on a replica's
event loop, and 200 plan jobs pushed /v1/decide's p99 from 12 to 206 ms
(docs/results/2026-12-03-plans-service.md). Deciding here, at the runner's nice 19, leaves the
replicas to the interactive callers. The model follows the registry: a new target is loaded
(verified, as the replicas load it) before the next decision; a policy that does not decide inline
(an LLM policy) is asked through the DeploymentHandle instead, not loaded twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from train.cost_budget import DEADLINE

log = logging.getLogger("halo.serve")
TARGET_CHECK_S = 2.0  # how often the registry's target is looked at


@contextmanager
def _budget(seconds: float) -> Iterator[None]:
    token = DEADLINE.set(min(DEADLINE.get(), time.perf_counter() + seconds))
    try:
        yield
    finally:
        DEADLINE.reset(token)


class RegistryModel(Policy):
    """The registry's current model version (the policy RulesFirst defers to)."""

    name = "served-model"

    def __init__(self, registry_name: str, namespace: str, app_name: str, *, cache_dir: str = "",
                 decision_budget_s: float = 0.08) -> None:
        self.registry_name, self.namespace, self.app_name = registry_name, namespace, app_name
        self.cache_dir, self.decision_budget_s = cache_dir, decision_budget_s
        self._model: Any = None
        self._key: tuple[str, str] | None = None
        self._checked = 0.0
        self._handle_policy: Any = None
        self._lock = asyncio.Lock()

    def _decide(self, state: EpisodeState) -> Decision:  # the runner decides through adecide only
        raise NotImplementedError("RegistryModel decides asynchronously (adecide)")

    async def adecide(self, state: EpisodeState) -> Decision:
        await self._follow_target()
        model = self._model
        if model is None or not model.inline:
            return await self._handle().adecide(state)
        t0 = time.perf_counter()
        with _budget(self.decision_budget_s):
            decision = model.decide_batch([state])[0]
        return replace(decision, latency_ms=round((time.perf_counter() - t0) * 1000.0, 3),
                       policy_version=decision.policy_version or model.version)

    async def _follow_target(self) -> None:
        if time.monotonic() - self._checked < TARGET_CHECK_S:
            return
        async with self._lock:
            if time.monotonic() - self._checked < TARGET_CHECK_S:
                return
            from serve.registry import get_registry

            target = await get_registry(self.registry_name, self.namespace).target.remote()
            self._checked = time.monotonic()
            if target is not None and (target["ref"], target["version"]) != self._key:
                await self._load(target)

    async def _load(self, target: dict[str, Any]) -> None:
        from serve.runtime import load_model
        from train.policies import decides_inline

        if target.get("policy_class") and not decides_inline(target["policy_class"]):
            self._model, self._key = None, (target["ref"], target["version"])  # an LLM: the replicas decide
            return
        try:
            model = await asyncio.to_thread(load_model, target["ref"], runtime="cpu",
                                            cache_dir=self.cache_dir or None)
        except Exception as exc:  # noqa: BLE001  (logged; the replicas' copy answers meanwhile)
            log.warning("plan runner: cannot load %s (%s): deciding through the replicas", target["ref"], exc)
            self._model, self._key = None, (target["ref"], target["version"])
            return
        self._model, self._key = model, (target["ref"], target["version"])
        self.version = model.version

    def _handle(self) -> Policy:
        if self._handle_policy is None:
            from serve.handle_policy import ServeHandlePolicy

            self._handle_policy = ServeHandlePolicy(app_name=self.app_name)
        return self._handle_policy  # type: ignore[no-any-return]

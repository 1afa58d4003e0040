"""The served student inside the cluster: a Policy that calls the decision deployment through a
Ray Serve DeploymentHandle (no HTTP proxy hop), for rollout workers running on the same cluster."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState

DEPLOYMENT_NAME = "DecisionService"


class ServeHandlePolicy(Policy):
    name = "student"

    def __init__(self, app_name: str = "halo-decide", deployment_name: str = DEPLOYMENT_NAME,
                 timeout_s: float = 30.0) -> None:
        self.app_name = app_name
        self.deployment_name = deployment_name
        self.timeout_s = timeout_s
        self.version = "unknown"
        self._handle: Any = None

    def _get_handle(self) -> Any:
        if self._handle is None:
            from ray import serve

            self._handle = serve.get_deployment_handle(self.deployment_name, app_name=self.app_name)
        return self._handle

    def _to_decision(self, data: dict[str, Any], t0: float) -> Decision:
        self.version = data.get("policy_version", self.version)
        # The service's decision as it made it; the latency is the one this caller saw.
        return replace(Decision.from_dict(data), latency_ms=(time.perf_counter() - t0) * 1000.0)

    def decide(self, state: EpisodeState) -> Decision:
        t0 = time.perf_counter()
        response = self._get_handle().decide_state.remote(state.to_dict())
        return self._to_decision(response.result(timeout_s=self.timeout_s), t0)

    async def adecide(self, state: EpisodeState) -> Decision:
        t0 = time.perf_counter()
        data = await asyncio.wait_for(self._get_handle().decide_state.remote(state.to_dict()), self.timeout_s)
        return self._to_decision(data, t0)

    def _decide(self, state: EpisodeState) -> Decision:
        return self.decide(state)

"""The model registry: one named Ray actor that says which model version the service should serve.

Replicas poll it (`sync`), load a new target off the request path and swap atomically, so a
rollout never fails a request; rollback re-targets the previous version (replicas keep it warm).
The same call carries each replica's metrics snapshot and loaded version, so the registry also
knows which version every replica answers with.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from solvers.errors import HaloError

# A replica not heard from for this many seconds is reported as gone.
REPLICA_STALE_S = 5.0


class RegistryError(HaloError, RuntimeError):
    pass


@ray.remote(num_cpus=0, max_restarts=-1)
class ModelRegistry:
    def __init__(self) -> None:
        self._revision = 0
        self._stack: list[dict[str, Any]] = []  # deployed versions, current last
        self._history: list[dict[str, Any]] = []  # every change, for the audit trail
        self._replicas: dict[str, dict[str, Any]] = {}
        self._metrics: dict[str, dict[str, Any]] = {}

    def target(self) -> dict[str, Any] | None:
        if not self._stack:
            return None
        return {**self._stack[-1], "revision": self._revision}

    def deploy(self, ref: str, info: dict[str, Any]) -> dict[str, Any]:
        self._revision += 1
        entry = {"ref": ref, **info, "deployed_at": time.time(), "deployed_revision": self._revision,
                 "failed": ""}
        self._stack.append(entry)
        self._history.append({"action": "deploy", "revision": self._revision, **entry})
        return self.target()  # type: ignore[return-value]

    def rollback(self) -> dict[str, Any] | None:
        """Re-target the newest earlier version that no replica failed to load; None when there is none."""
        earlier = [i for i, e in enumerate(self._stack[:-1]) if not e.get("failed")]
        if not earlier:
            return None
        gone = self._stack[-1]
        del self._stack[earlier[-1] + 1:]
        self._revision += 1
        self._history.append({"action": "rollback", "revision": self._revision, "from": gone.get("version"),
                              "to": self._stack[-1].get("version"), "at": time.time()})
        return self.target()  # type: ignore[return-value]

    def sync(self, replica_id: str, status: dict[str, Any], metrics: dict[str, Any] | None) -> dict[str, Any] | None:
        self._replicas[replica_id] = {**status, "seen_at": time.time()}
        if status.get("failed_revision"):
            # A version some replica could not load (or probe) is never a rollback target again.
            for entry in self._stack:
                if entry.get("deployed_revision") == status["failed_revision"] and not entry.get("failed"):
                    entry["failed"] = status.get("load_error") or "failed to load"
        if metrics is not None:
            self._metrics[replica_id] = metrics
        return self.target()

    def status(self) -> dict[str, Any]:
        now = time.time()
        replicas = {rid: {**s, "alive": now - s["seen_at"] < REPLICA_STALE_S} for rid, s in self._replicas.items()}
        return {"target": self.target(), "replicas": replicas, "history": list(self._history)}

    def metrics(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str]]]:
        now = time.time()
        live = {rid: {"name": s.get("name", ""), "version": s.get("version", "")}
                for rid, s in self._replicas.items() if now - s["seen_at"] < REPLICA_STALE_S}
        return dict(self._metrics), live


def get_or_create_registry(name: str, namespace: str) -> Any:
    return ModelRegistry.options(name=name, namespace=namespace, lifetime="detached",
                                 get_if_exists=True).remote()  # type: ignore[attr-defined]


def get_registry(name: str, namespace: str) -> Any:
    return ray.get_actor(name, namespace=namespace)

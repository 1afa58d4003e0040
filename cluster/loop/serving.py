"""The loop's view of the decision service: which model it serves, and rolling out a new one.

A rollout is POST /v1/admin/model: every replica loads the new version off the request path and
swaps atomically (serve/app.py), so no request fails. Before posting, the loop asks what the
service already targets: after a crash between the POST and the event that records it, the
candidate is found deployed and the step is recorded without posting again (no double promotion).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import httpx

from solvers.errors import HaloError

API_KEY_ENV = "HALO_SERVE_API_KEY"
# Promotion calls the admin routes, which answer 403 to a decision key.
ADMIN_KEY_ENV = "HALO_SERVE_ADMIN_KEY"


class ServingError(HaloError, RuntimeError):
    pass


@dataclass(frozen=True)
class ServedModel:
    ref: str
    name: str
    version: str


class ServingClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, timeout_s: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        key = api_key if api_key is not None else (os.environ.get(ADMIN_KEY_ENV) or os.environ.get(API_KEY_ENV, ""))
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        try:
            response = httpx.request(method, url, headers=self._headers, timeout=self.timeout_s, **kwargs)
        except httpx.HTTPError as exc:
            raise ServingError(f"decision service at {self.base_url} unreachable: {exc}") from exc
        if response.status_code >= 400:
            raise ServingError(f"{method} {url}: HTTP {response.status_code}: {response.text[:500]}")
        return response.json()

    def current(self) -> ServedModel | None:
        target = self._call("GET", "/v1/admin/model").get("target")
        if not target:
            return None
        return ServedModel(target["ref"], target.get("name", ""), target.get("version", ""))

    def status(self) -> dict[str, Any]:
        return self._call("GET", "/v1/admin/model")

    def deploy(self, ref: str, version: str, *, settle_s: float = 60.0) -> dict[str, Any]:
        """Roll `ref` out; return once every live replica answers with `version`."""
        status = self._call("POST", "/v1/admin/model", json={"model": ref})
        deadline = time.monotonic() + settle_s
        while True:
            replicas = status.get("replicas", {})
            versions = {r.get("version") for r in replicas.values() if r.get("alive", True)}
            if versions == {version}:
                return status
            if time.monotonic() > deadline:
                raise ServingError(f"replicas still serve {sorted(map(str, versions))} {settle_s}s after "
                                   f"rolling out {version}")
            time.sleep(0.3)
            status = self.status()

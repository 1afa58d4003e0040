"""The decision service's handler for errors of the one hierarchy (serve.app._halo_error): a route
that lets one through answers its cause's status and kind, with its first line and no trace."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from rollout.core.state import StateError
from rollout.pddl.model import PDDLParseError
from rollout.store import StoreUnavailable
from rollout.store.lease import LeaseHeld
from serve.app import _halo_error, _invalid_state
from solvers.errors import HaloError

RAISED = {"input": PDDLParseError("unbalanced ')' at line 4\n(details)"),
          "infra": StoreUnavailable("storage at s3://b unavailable"),
          "busy": LeaseHeld("run r1 is written by pid 7"),
          "other": HaloError("the registry has no target")}


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    app.add_exception_handler(HaloError, _halo_error)
    app.add_exception_handler(StateError, _invalid_state)

    @app.get("/raise/{what}")
    async def raise_it(what: str) -> None:
        raise RAISED[what]

    @app.get("/state")
    async def bad_state() -> None:
        raise StateError("steps", "must be a list")

    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(("what", "status", "kind", "detail"), [
    ("input", 422, "invalid_request", "unbalanced ')' at line 4"),
    ("infra", 503, "unavailable", "storage at s3://b unavailable"),
    ("busy", 409, "conflict", "run r1 is written by pid 7"),
    ("other", 500, "internal", "the registry has no target"),
])
def test_an_error_answers_by_its_cause(client: TestClient, what: str, status: int, kind: str, detail: str) -> None:
    response = client.get(f"/raise/{what}")
    assert response.status_code == status
    assert response.json() == {"error": kind, "field": None, "detail": detail}
    assert "Traceback" not in response.text
    assert ("Retry-After" in response.headers) == (status == 503)


def test_a_state_error_keeps_its_own_answer(client: TestClient) -> None:
    """The more precise handler of a subclass wins (a bad state names its field)."""
    response = client.get("/state")
    assert response.status_code == 422 and response.json()["field"] == "steps"


def test_the_service_registers_it() -> None:
    from serve.app import api

    assert api.exception_handlers[HaloError] is _halo_error and api.exception_handlers[StateError] is _invalid_state

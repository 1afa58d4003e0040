"""Fixtures of the solver tests."""

from __future__ import annotations

import pytest
from solver_helpers import IPC, mark_preexisting_processes

import solvers


@pytest.fixture
def bw_domain() -> str:
    return (IPC / "blocksworld" / "domain.pddl").read_text()


@pytest.fixture
def bw_problem() -> str:
    return (IPC / "blocksworld" / "probBLOCKS-4-1.pddl").read_text()


@pytest.fixture(autouse=True)
def _baseline_process_table():
    mark_preexisting_processes()
    yield


@pytest.fixture(scope="session", autouse=True)
def _stop_workers_at_end():
    yield
    solvers.shutdown()

"""The one error hierarchy (solvers/errors.py) and its mappings at the edges: every exception
class the packages raise on purpose is a HaloError; the command line answers by cause (one line,
the documented exit code), the service by cause (an HTTP status); an infra error has a reason for
the records whatever layer raised it; and the one RetryPolicy."""

from __future__ import annotations

import ast
import os
import signal
from pathlib import Path

import pytest

from cluster.errors import (
    EXIT_BUSY,
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Busy,
    CliError,
    Unreachable,
    UsageError,
    classify,
)
from rollout.core.infra import InfraFailure, infra_reason, short_reason
from rollout.llm.backoff import RetryPolicy
from rollout.llm.budget import BudgetUnavailable
from rollout.llm.errors import LLMConnectionError, LLMRequestError
from rollout.pddl.model import PDDLParseError
from rollout.policies.student_client import DecisionServiceError
from rollout.store import StoreError, StoreUnavailable
from rollout.store.lease import LeaseHeld
from serve.errors import http_answer
from solvers import pool
from solvers.errors import BusyError, HaloError, InfraError, InputError
from solvers.limits import Limits
from solvers.plans import PlanParseError, parse_plan
from solvers.results import ErrorCategory, ToolFailure

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("solvers", "rollout", "train", "serve", "cluster")
BUILTIN_BASES = {"Exception", "ValueError", "RuntimeError", "FileNotFoundError", "OSError", "KeyError",
                 "TypeError", "LookupError", "ConnectionError", "TimeoutError"}
# Exception classes outside the hierarchy, with the reason.
OUTSIDE: dict[tuple[str, str], str] = {
    ("solvers/errors.py", "HaloError"): "the root of the hierarchy",
    ("solvers/pddl_check.py", "CheckTimeout"): "loaded by path in the sandboxed worker, stdlib only; "
                                               "solvers.api turns it into a result",
    ("solvers/pddl_check.py", "CheckFailed"): "the same (a check_failed result, a tool failure)",
    ("serve/guard.py", "Refusal"): "issue 30 rewrites serve/guard.py; a refusal is an HTTP answer already",
    ("serve/guard.py", "ClientGone"): "issue 30 rewrites serve/guard.py; the client left, nothing to answer",
}


def _exception_classes() -> list[tuple[str, str, list[str]]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                    found.append((str(path.relative_to(ROOT)), node.name, bases))
    return found


def test_every_public_exception_class_is_in_the_hierarchy() -> None:
    """A class whose only bases are built-in exceptions stands outside the one hierarchy."""
    outside = [(file, name) for file, name, bases in _exception_classes()
               if bases and all(b in BUILTIN_BASES for b in bases) and (file, name) not in OUTSIDE]
    assert outside == [], f"exception classes outside solvers.errors.HaloError: {outside}"


def test_the_classes_keep_their_builtin_bases() -> None:
    """Re-parenting changes no `except`: a spec error is still a ValueError, a store error a RuntimeError."""
    assert issubclass(PDDLParseError, ValueError) and issubclass(PDDLParseError, InputError)
    assert issubclass(StoreUnavailable, RuntimeError) and issubclass(StoreUnavailable, InfraError)
    assert issubclass(LeaseHeld, RuntimeError) and issubclass(LeaseHeld, BusyError)
    assert issubclass(ToolFailure, RuntimeError) and issubclass(ToolFailure, InfraError)


@pytest.mark.parametrize(("exc", "code", "line"), [
    (PDDLParseError("unexpected ')' at line 3\nmore detail"), EXIT_USAGE, "unexpected ')' at line 3"),
    (PlanParseError(2, "pick-up a"), EXIT_USAGE, "line 2: not a plan step: 'pick-up a'"),
    (LLMConnectionError("refused", attempts=4), EXIT_UNREACHABLE, "llm:connection_error: refused"),
    (StoreUnavailable("storage at s3://b unavailable"), EXIT_UNREACHABLE,
     "the store is unreachable: storage at s3://b unavailable"),
    (LeaseHeld("run r1 is written by pid 7"), EXIT_BUSY, "run r1 is written by pid 7"),
    (StoreError("the table has another schema"), EXIT_FAILED, "the table has another schema"),
    # the service's verdict on a request is not a dependency failing: the job failed, with its reason
    (DecisionServiceError("bad state", status=422), EXIT_FAILED, "bad state"),
    (KeyError("agent 99"), EXIT_FAILED, "unexpected KeyError: 'agent 99' (re-run with --debug for the full trace)"),
])
def test_the_command_line_answers_by_cause(exc: BaseException, code: int, line: str) -> None:
    assert classify(exc) == (code, line)


def test_the_command_line_errors_are_the_hierarchy() -> None:
    """The click-aware errors the commands raise are members of the one hierarchy, not a second one."""
    assert isinstance(UsageError("x"), InputError) and UsageError("x").exit_code == EXIT_USAGE
    assert isinstance(Unreachable("x"), InfraError) and Unreachable("x").exit_code == EXIT_UNREACHABLE
    assert isinstance(Busy("x"), BusyError) and Busy("x").exit_code == EXIT_BUSY
    assert CliError("x").exit_code == EXIT_FAILED and isinstance(CliError("x"), HaloError)


@pytest.mark.parametrize(("exc", "status", "kind"), [
    (PDDLParseError("bad"), 422, "invalid_request"),
    (StoreUnavailable("down"), 503, "unavailable"),
    (LeaseHeld("held"), 409, "conflict"),
    (StoreError("broken"), 500, "internal"),
])
def test_the_service_answers_by_cause(exc: HaloError, status: int, kind: str) -> None:
    assert http_answer(exc) == (status, kind)


@pytest.mark.parametrize(("exc", "reason"), [
    (ToolFailure(ErrorCategory.SOLVER_CRASH, "exit -11"), "solver:solver_crash: exit -11"),
    (LLMRequestError("unknown model"), "llm:request_error: unknown model"),
    (DecisionServiceError("no answer"), "student:unreachable: no answer"),
    (InfraFailure("solver_unavailable", "not found"), "solver_unavailable: not found"),
    (StoreUnavailable("down"), "store: down"),
    (BudgetUnavailable("silent for 60s"), "llm_budget: silent for 60s"),
])
def test_infra_errors_answer_for_the_records(exc: HaloError, reason: str) -> None:
    """The exception gives its reason ("kind: message"); a record keeps it, so it is never an outcome."""
    assert infra_reason(exc) == reason
    assert short_reason(reason) == reason.rsplit(": ", 1)[0]


@pytest.mark.parametrize("exc", [PDDLParseError("bad"), LeaseHeld("held"), HaloError("x"), ValueError("x")])
def test_other_errors_have_no_infra_reason(exc: Exception) -> None:
    assert infra_reason(exc) == ""


def test_core_infra_imports_no_other_room_of_rollout() -> None:
    """rollout/core/infra.py asks the exception, so it needs neither rollout.llm nor rollout.policies."""
    tree = ast.parse((ROOT / "rollout" / "core" / "infra.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name for name in imported if name != "__future__"} <= {"solvers", "solvers.errors"}, imported


def test_a_plan_line_error_carries_its_line() -> None:
    with pytest.raises(PlanParseError) as caught:
        parse_plan("(pick-up a)\n\n(stack a b\n")
    assert caught.value.line == 3 and isinstance(caught.value, ValueError)


def test_a_worker_that_does_not_answer_is_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real solver worker, stopped: the call ends at its deadline as timed out (by the error's type)."""
    monkeypatch.setattr(pool, "ANSWER_GRACE_S", 0.5)
    workers = pool.WorkerPool("none", size=1)
    workers.warm(1)
    (worker,) = workers._all  # noqa: SLF001
    os.kill(worker.proc.pid, signal.SIGSTOP)
    try:
        result = workers.request({"kind": "exec", "argv": ["/bin/true"]}, files={}, limits=Limits(timeout_s=1))
    finally:
        worker.kill()
    assert result.returncode is None and result.timed_out and "no answer in time" in result.error


def test_one_retry_policy() -> None:
    defined = [str(p.relative_to(ROOT)) for package in PACKAGES for p in (ROOT / package).rglob("*.py")
               if "class RetryPolicy" in p.read_text()]
    assert defined == ["rollout/llm/backoff.py"]
    from rollout.policies.student_client import RetryPolicy as StudentRetry
    from rollout.store import RetryPolicy as StoreRetry

    assert StudentRetry is StoreRetry is RetryPolicy


def test_a_retry_policy_is_bounded() -> None:
    with pytest.raises(ValueError, match="needs retries or budget_s"):
        RetryPolicy()


@pytest.mark.parametrize("exc", [ToolFailure(ErrorCategory.SOLVER_CRASH, "exit -11"),
                                 InfraFailure("solver_unavailable", "not found"),
                                 DecisionServiceError("overloaded", status=503, error="overloaded"),
                                 LLMConnectionError("refused", attempts=4)])
def test_an_error_crosses_processes_whole(exc: HaloError) -> None:
    """Pickled (as Ray sends it), an error keeps its fields and so its infra reason; the built-in
    pickling would call ToolFailure(message) and fail, or drop a DecisionServiceError's status."""
    import pickle

    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc) and str(again) == str(exc) and again.__dict__ == exc.__dict__
    assert infra_reason(again) == infra_reason(exc) != ""

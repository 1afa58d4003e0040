"""Infrastructure failures through records, reports, datasets and the store (rollout/core/infra.py)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rollout.core.infra import InfraFailure, infra_reason, short_reason  # noqa: E402
from rollout.core.trajectory import STEP_SCHEMA, is_infra_failure  # noqa: E402
from rollout.llm.errors import LLMBadResponseError, LLMConnectionError  # noqa: E402
from rollout.loop.report import summarize  # noqa: E402
from rollout.policies.student_client import DecisionServiceError  # noqa: E402
from rollout.store import TrajectoryStore  # noqa: E402
from tests.trajectories import make_episodes  # noqa: E402


@pytest.mark.parametrize(("exc", "kind"), [
    (LLMConnectionError("refused", attempts=4), "llm:connection_error"),
    (LLMBadResponseError("not JSON"), "llm:bad_response"),
    (DecisionServiceError("no answer"), "student:unreachable"),
    (DecisionServiceError("overloaded", status=503), "student:503"),
    (DecisionServiceError("bad key", status=401), "student:401"),
    (InfraFailure("solver_unavailable", "FileNotFoundError: Fast Downward not found"), "solver_unavailable"),
])
def test_dependency_failures_are_infra(exc: Exception, kind: str) -> None:
    assert short_reason(infra_reason(exc)) == kind


@pytest.mark.parametrize("exc", [DecisionServiceError("bad state", status=422), ValueError("a bug"),
                                 KeyError("agent 99")])
def test_other_failures_are_not(exc: Exception) -> None:
    assert infra_reason(exc) == ""


def test_report_counts_infra_failures_apart() -> None:
    episodes = make_episodes("r", 10)
    for ep in episodes[:4]:
        ep.infra_error = "llm:connection_error: refused"
        ep.success_validator = False
    s = summarize("p", episodes)
    outcomes = episodes[4:]
    assert s.infra_failures == 4 and s.episodes == 6
    assert s.validator_success == pytest.approx(sum(e.success_validator for e in outcomes) / 6)


def test_dataset_drops_and_counts_them(tmp_path: Path) -> None:
    from train.dataset import BuildConfig, build_examples

    episodes = make_episodes("r", 30)
    for ep in episodes[:5]:
        ep.infra_error = "student:unreachable: no answer"
        ep.success_validator = True  # even a "success" of a failed dependency is not trusted
    _, stages = build_examples(episodes, BuildConfig(augment_copies=0))
    _, clean = build_examples(episodes[5:], BuildConfig(augment_copies=0))
    assert stages["infrastructure failures dropped"] == 5 and stages["episodes read"] == 30
    assert stages["examples kept"] == clean["examples kept"]


def test_the_field_is_never_a_store_column(tmp_path: Path) -> None:
    assert "infra_error" not in STEP_SCHEMA.names
    store = TrajectoryStore(tmp_path)
    ep = dataclasses.replace(make_episodes("r", 1)[0], infra_error="")
    store.write_episodes("r", [ep])
    back = store.read_episodes(["r"])[0]
    assert back.infra_error == "" and not is_infra_failure(back)

"""The search with a value model (`search:...,value=DIR`, rollout/policies/search_value.py): the
spec loads a value model artifact and refuses anything else in one line, and a search ordered by
the model runs end to end in the simulated world within its call budget, its tree intact."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rollout.core.trajectory import EpisodeRecord
from rollout.loop.episode import EpisodeConfig, run_episode
from rollout.policies import PolicySpecError, make_policy
from rollout.policies.search import DEFAULT_VALUE_WEIGHT, SearchPolicy, parse_search_spec
from rollout.sim import SimConfig
from rollout.tasks import Task
from tests.value_records import value_episodes
from train.fast_policy import train_fast_policy
from train.value_model import train_value_model

FAST = SimConfig(latency_scale=0.0)
pytestmark = pytest.mark.usefixtures("solver_cache")


@pytest.fixture(scope="module")
def value_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("value") / "v1"
    train_value_model(value_episodes(n_tasks=40, seed=1), out, name="v1")
    return out


def _run(task: Task, seed: int, spec: str) -> EpisodeRecord:
    config = EpisodeConfig(seed=seed, sim=FAST, run_id="search-value-test")
    return asyncio.run(run_episode(task, make_policy(spec, seed=seed), config))


def _tree(record: EpisodeRecord) -> list[tuple]:
    return [(s.step, s.parent_step, s.branch, s.on_path, s.agent_id, s.domain_after, s.plan_after)
            for s in record.steps]


def test_the_spec_takes_a_value_model_directory(value_dir: Path) -> None:
    spec = parse_search_spec(f"prior=rules+scripted,width=2,value={value_dir},value_weight=2.5")
    assert (spec.value, spec.value_weight, spec.prior) == (str(value_dir), 2.5, "rules+scripted")
    assert parse_search_spec(f"value={value_dir}").value_weight == DEFAULT_VALUE_WEIGHT
    policy = make_policy(f"search:prior=rules+scripted,value={value_dir}")
    assert isinstance(policy, SearchPolicy) and policy.value is not None and policy.value.name == "v1"
    assert policy.version.endswith(f"-vv1@{policy.value.version}x{DEFAULT_VALUE_WEIGHT:g}")
    plain = make_policy("search:prior=rules+scripted")
    assert isinstance(plain, SearchPolicy) and plain.value is None and "-v" not in plain.version.split("-c")[1]


def test_a_directory_that_is_not_a_value_model_is_one_clear_line(tmp_path: Path) -> None:
    from tests.train.synthetic import synthetic_episodes

    fast = tmp_path / "fast"
    train_fast_policy(synthetic_episodes(n_tasks=6, seed=3), fast)
    for directory, message in ((tmp_path / "nowhere", "no such directory"), (tmp_path, "no manifest"),
                               (fast, "not a value model")):
        with pytest.raises(PolicySpecError, match=message) as info:
            make_policy(f"search:prior=rules+scripted,value={directory}")
        assert "\n" not in str(info.value)
    with pytest.raises(PolicySpecError, match="value_weight must be more than 0"):
        make_policy(f"search:value={fast},value_weight=0")


def test_a_search_ordered_by_the_value_model_runs_within_its_budget(tasks: dict[str, Task], value_dir: Path) -> None:
    spec = f"search:prior=rules+scripted,width=3,max_calls=12,checks=2,value={value_dir}"
    records = [_run(task, seed, spec) for task in list(tasks.values())[:3] for seed in (0, 1)]
    assert not any(r.error or r.infra_error for r in records)
    for record in records:
        assert record.total_llm_calls <= 12 + 2 + 1  # the budget, then the closing checks and rendering
        assert record.total_llm_calls == sum(s.llm_calls for s in record.steps)
        path = [s for s in record.steps if s.on_path]
        for before, after in zip(path, path[1:], strict=False):
            assert after.parent_step == before.step
        assert {s.decided_by for s in record.steps} <= {"search", "rule"}
        assert "-vv1@" in record.policy_version
    assert any(r.success_oracle for r in records)
    again = _run(list(tasks.values())[0], 0, spec)
    assert _tree(again) == _tree(records[0])  # deterministic, as the search without a value model


def test_the_value_model_changes_which_nodes_the_search_expands(tasks: dict[str, Task], value_dir: Path) -> None:
    plain = "search:prior=rules+scripted,width=3,max_calls=12"
    valued = f"{plain},value={value_dir},value_weight=10"
    pairs = [(_run(task, 3, plain), _run(task, 3, valued)) for task in list(tasks.values())[:6]]
    assert any(_tree(a) != _tree(b) for a, b in pairs)

"""Expert iteration (train/rl_exit.py): which steps of the search's episodes join the pool, the
pool on disk, and one real iteration (the search over the simulated world with real planners and
validator) whose refitted policy learnt the accepted paths."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from rl_start import fit_rl_start

from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord
from rollout.tasks import load_tasks
from train.rl import LinearWeights
from train.rl_exit import load_pool, path_examples, save_pool, search_rollouts
from train.rl_loop import RLSettings, run_rl

TASKS = "planbench:blocksworld:3"


@pytest.fixture(scope="module")
def start(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fit_rl_start(tmp_path_factory.mktemp("exit") / "start", TASKS, "exit-test-teacher")


def _step(step: int, agent: int, *, on_path: bool = True, decided_by: str = "search") -> StepRecord:
    state = EpisodeState(task_description=f"state {step}")
    return StepRecord(step=step, state_json=state.to_json(), agent_id=agent, agent_name="x", decided_by=decided_by,
                      is_hardcoded=decided_by == "rule", on_path=on_path)


def _episode(eid: str, *, accepted: bool = True, infra: str = "", error: str = "") -> EpisodeRecord:
    steps = [_step(0, 18), _step(1, 19, on_path=False), _step(2, 9, decided_by="rule"), _step(3, 2)]
    return EpisodeRecord(episode_id=eid, run_id="exit-1", task_id=f"task-{eid}", family="f", domain_name="d",
                         policy_name="search", policy_version="0", llm_backend="sim", success_validator=accepted,
                         success_oracle=accepted, steps=steps, infra_error=infra, error=error)


def test_only_the_chosen_paths_own_decisions_of_accepted_episodes_join_the_pool():
    episodes = [("a", _episode("a")), ("b", _episode("b", accepted=False)),
                ("c", _episode("c", infra="endpoint down")), ("d", _episode("d", error="ValueError: x"))]
    examples = path_examples(episodes)
    assert {e.episode_id for e in examples} == {"a"}  # failed, infrastructure and broken episodes give nothing
    assert [e.agent_id for e in examples] == [18, 2]  # the branch left (19) and the rule's step (9) are not labels


def test_the_pool_round_trips_through_its_files_one_per_iteration(tmp_path):
    first = path_examples([("a", _episode("a"))])
    second = path_examples([("e", _episode("e"))])
    save_pool(tmp_path, 1, first)
    save_pool(tmp_path, 2, second)
    assert load_pool(tmp_path, 1) == first
    assert load_pool(tmp_path, 2) == first + second
    assert not list((tmp_path / "rl_checkpoints").glob("*.tmp"))


def test_one_iteration_refits_the_policy_on_the_searchs_accepted_paths(start, tmp_path):
    settings = RLSettings(tasks=TASKS, iterations=1, tasks_per_iter=3, group=1, concurrency=2, seed=3,
                          advantage="exit")
    run_rl(settings, start, tmp_path / "exit", log=lambda _: None)
    history = json.loads((tmp_path / "exit" / "rl_history.json").read_text())
    pool = load_pool(tmp_path / "exit", 1)
    assert history[0]["episodes"] == 3 and history[0]["exit_examples"] == len(pool) > 0
    assert {e.decided_by for e in pool} <= {"search", "model"}
    policy = LinearWeights.load(tmp_path / "exit")
    agreed = sum(int(policy.scores(policy.rows(policy.bucket_ids(e.state))).argmax()) == e.agent_id for e in pool)
    assert agreed / len(pool) >= 0.5  # the refit learnt the paths it was given (a coin over 21 agents: 0.05)


def test_the_searchs_call_budget_is_the_exit_calls_setting(start):
    task = load_tasks(TASKS)[:1]
    for calls in (4, 30):
        settings = RLSettings(tasks=TASKS, group=1, concurrency=1, seed=3, advantage="exit", exit_calls=calls)
        [(_, record)] = asyncio.run(search_rollouts(task, LinearWeights.load(start), settings, 1))
        assert f"-c{calls}-" in record.policy_version
        assert record.total_llm_calls <= calls + 3  # the budget, then at most the closing checks and rendering

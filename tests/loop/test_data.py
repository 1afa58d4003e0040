"""Which stored episodes a cycle trains on: accepted, same backend, not held out, not gate runs;
new ones first, plus a seeded share of older ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cluster.loop.data import Snapshot, accepted_episodes, load_snapshot_episodes, take_snapshot
from rollout.store import TrajectoryStore

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tests.trajectories import make_episodes  # noqa: E402


@pytest.fixture
def store(tmp_path: Path) -> TrajectoryStore:
    s = TrajectoryStore(str(tmp_path / "store"))
    s.write_episodes("rollout-a", make_episodes("rollout-a", 40))
    s.write_episodes("real-llm", make_episodes("real-llm", 10, llm_backend="openai:gpt-x"))
    s.write_episodes("loop-x-gate-c0001-candidate", make_episodes("loop-x-gate-c0001-candidate", 10))
    return s


def test_only_accepted_sim_episodes_off_the_holdout_and_gate_runs_count(store: TrajectoryStore) -> None:
    holdout = {"planbench/blocksworld/instance-0", "planbench/blocksworld/instance-1"}
    got = accepted_episodes(store, accept_filter="oracle", llm_backend="sim", exclude_tasks=holdout,
                            exclude_run_prefix="loop-x-gate-")
    episodes = {e.episode_id: e for e in store.read_episodes()}
    assert got
    for eid, info in got.items():
        ep = episodes[eid]
        assert ep.success_oracle is True and ep.llm_backend == "sim" and ep.run_id == "rollout-a"
        assert info.task_id not in holdout
    expected = {e.episode_id for e in episodes.values() if e.run_id == "rollout-a" and e.success_oracle is True
                and e.task_id not in holdout}
    assert set(got) == expected
    by_validator = accepted_episodes(store, accept_filter="validator", llm_backend="sim", exclude_tasks=set(),
                                     exclude_run_prefix="loop-x-gate-")
    assert len(by_validator) > len(got)  # oracle is unknown on every 4th episode


def test_snapshot_takes_new_and_a_seeded_share_of_old(store: TrajectoryStore) -> None:
    accepted = accepted_episodes(store, accept_filter="validator", llm_backend="sim", exclude_tasks=set(),
                                 exclude_run_prefix="loop-x-gate-")
    ids = sorted(accepted)
    used = set(ids[:12])
    snap = take_snapshot(accepted, used, old_share=0.3, seed="0-2", table_version=store.version())
    assert snap.new == ids[12:]
    assert len(snap.old) == min(12, round(0.3 / 0.7 * len(snap.new))) and set(snap.old) <= used
    again = take_snapshot(accepted, used, old_share=0.3, seed="0-2", table_version=store.version())
    assert again.old == snap.old and again.digest == snap.digest
    assert Snapshot.from_dict(snap.to_dict()).digest == snap.digest
    assert take_snapshot(accepted, used, old_share=0.0, seed="x", table_version=None).old == []
    loaded = load_snapshot_episodes(store, snap)
    assert [e.episode_id for e in loaded] == snap.episode_ids


def test_missing_episodes_are_reported(store: TrajectoryStore) -> None:
    snap = Snapshot(new=["no-such-episode"], old=[], runs=["rollout-a"], table_version=0)
    with pytest.raises(RuntimeError, match="no longer in the store"):
        load_snapshot_episodes(store, snap)

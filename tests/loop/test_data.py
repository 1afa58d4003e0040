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


def _feedback_copies(run: str, n: int, key: str, code: str) -> list:
    """`n` accepted episodes as /v1/feedback stores them: ID `KEY:ID`, the service's verdict in code_version."""
    from dataclasses import replace

    return [replace(e, episode_id=f"{key}:{e.episode_id}", code_version=code, success_validator=True,
                    success_oracle=True) for e in make_episodes(run, n)]


def test_only_verified_feedback_counts(store: TrajectoryStore) -> None:
    before = accepted_episodes(store, accept_filter="oracle", llm_backend="sim", exclude_tasks=set(),
                               exclude_run_prefix="loop-x-gate-")
    store.write_episodes("serve-feedback", _feedback_copies("serve-feedback", 30, "old", "serve-feedback")
                         + _feedback_copies("serve-feedback", 30, "liar", "serve-feedback:disagrees"))
    after = accepted_episodes(store, accept_filter="oracle", llm_backend="sim", exclude_tasks=set(),
                              exclude_run_prefix="loop-x-gate-")
    assert after == before  # unchecked (older) feedback and disagreeing claims are never trusted


def test_one_feedback_key_is_capped_to_its_share(store: TrajectoryStore) -> None:
    store.write_episodes("serve-feedback", _feedback_copies("serve-feedback", 150, "mallory",
                                                            "serve-feedback:verified"))
    accepted = accepted_episodes(store, accept_filter="validator", llm_backend="sim", exclude_tasks=set(),
                                 exclude_run_prefix="loop-x-gate-")
    from_key = [e for e in accepted.values() if e.source == "mallory"]
    assert len(from_key) == 150
    snap = take_snapshot(accepted, set(), old_share=0.0, seed="x", table_version=None, max_key_share=0.2)
    chosen = snap.episode_ids
    share = sum(accepted[e].source == "mallory" for e in chosen) / len(chosen)
    assert 0.15 <= share <= 0.2  # 150 of ~180 accepted, but at most a fifth of the dataset
    alone = {e: a for e, a in accepted.items() if a.source == "mallory"}
    assert take_snapshot(alone, set(), old_share=0.0, seed="x", table_version=None).episode_ids == []

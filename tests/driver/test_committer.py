"""The committer against a real local Delta store: when it commits, and that nothing is lost."""

from __future__ import annotations

import time

from rollout.driver.committer import Committer
from rollout.store import RetryPolicy, TrajectoryStore
from rollout.store.steps_table import episodes_to_arrow
from tests.trajectories import make_episodes


def _wait_for(predicate, timeout_s: float = 10.0) -> bool:  # noqa: ANN001
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_batches_commit_when_old_enough_and_close_flushes_the_rest(tmp_path):
    store = TrajectoryStore(tmp_path)
    episodes = make_episodes("r", 9)
    committer = Committer(store, "r", max_age_s=0.3).start()
    try:
        assert committer.submit(episodes_to_arrow(episodes[:3]), episodes=3)
        assert committer.submit(episodes_to_arrow(episodes[3:4]))
        assert committer.pending == 4
        assert _wait_for(lambda: committer.commits == 1), "a batch older than max_age_s was not committed"
        assert committer.committed == 4 and committer.pending == 0
        assert committer.submit(episodes_to_arrow(episodes[4:9]), episodes=5)
    finally:
        committer.close()
    assert committer.commits == 2 and committer.committed == 9 and committer.pending == 0
    assert store.episode_ids("r") == {ep.episode_id for ep in episodes}


def test_a_full_batch_commits_without_waiting_for_its_age(tmp_path):
    store = TrajectoryStore(tmp_path)
    episodes = make_episodes("r", 6, steps=2)
    committer = Committer(store, "r", max_rows=8, max_age_s=60.0).start()
    try:
        for ep in episodes[:4]:  # 8 rows: full
            committer.submit(episodes_to_arrow([ep]))
        assert _wait_for(lambda: committer.commits == 1), "a full batch waited for max_age_s"
        assert committer.rows == 8 and committer.committed == 4
        committer.submit(episodes_to_arrow(episodes[4:]), episodes=2)
        time.sleep(0.2)
        assert committer.commits == 1  # neither full nor old: still waiting
    finally:
        committer.close()
    assert committer.committed == 6 and len(store.episode_ids("r")) == 6


def test_a_failed_commit_stops_the_committer_and_refuses_more(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's folder should be")
    store = TrajectoryStore(blocker / "store", retry=RetryPolicy(budget_s=0.5))
    committer = Committer(store, "r", max_age_s=0.05).start()
    try:
        committer.submit(episodes_to_arrow(make_episodes("r", 2)), episodes=2)
        assert _wait_for(lambda: committer.failure is not None)
        assert not committer.submit(episodes_to_arrow(make_episodes("r", 1, start=2)))
        assert committer.committed == 0 and committer.pending == 2  # reported, not dropped silently
    finally:
        committer.close(timeout_s=5)

"""A student rollout through the served policy: a real episode of the simulated agent world
(real planner and validator) decided by `rules+student:URL`, then sent back as feedback."""

from __future__ import annotations


def test_sim_episode_with_the_served_student_and_feedback(cluster, monkeypatch):
    from rollout.loop.episode import EpisodeConfig, run_episode_sync
    from rollout.policies import make_policy
    from rollout.store import TrajectoryStore
    from rollout.tasks import find_task

    monkeypatch.setenv("HALO_SERVE_API_KEY", "test-key-0123456789")
    task = find_task("planbench/blocksworld/instance-2", "bundled")
    policy = make_policy(f"rules+student:{cluster.url}")
    record = run_episode_sync(task, policy, EpisodeConfig(max_steps=4, seed=1, llm_backend="sim"))
    assert record.llm_backend == "sim" and record.steps
    by = {s.decided_by for s in record.steps}
    assert by <= {"rule", "model"}, by
    assert all(s.is_hardcoded == (s.decided_by == "rule") for s in record.steps)
    student = policy.inner
    answer = student.send_feedback(record)
    assert answer["episode_id"] == record.episode_id and answer["stored"] is True
    assert answer["steps"] == record.num_steps
    # a genuine episode: the service's own validator and oracle agree with what it claims
    assert answer["verdict"] == "serve-feedback:verified", answer
    assert student.send_feedback(record)["stored"] is False
    stored = {e.episode_id: e for e in TrajectoryStore(str(cluster.store)).read_episodes(["serve-feedback"])}
    back = stored[answer["stored_id"]]
    assert [(s.agent_id, s.decided_by, s.state_json) for s in back.steps] == \
        [(s.agent_id, s.decided_by, s.state_json) for s in record.steps]
    assert back.success_validator == record.success_validator and back.llm_backend == "sim"
    student.close()

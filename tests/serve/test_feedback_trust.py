"""Feedback is evidence, not truth: 150 fabricated episodes (every step agent 19, every episode
claiming success) sent through the real service with a feedback key cannot change what the online
loop trains on; each is stored under the key's name with the service's own verdicts, as a
disagreement. Also: the feedback role, episode IDs namespaced per key, the provenance documents."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from fabricated import fabricated_body
from serve_keys import API_KEY, FEEDBACK_KEY, STALL_KEY

from tests.trajectories import make_episodes

N_FABRICATED = 150
FEEDBACK_TOKEN = FEEDBACK_KEY.split("=", 1)[1]


def _snapshots(store) -> dict[str, list[str]]:
    from cluster.loop.data import accepted_episodes, take_snapshot

    out = {}
    for accept in ("oracle", "validator"):
        accepted = accepted_episodes(store, accept_filter=accept, llm_backend="sim", exclude_tasks=set(),
                                     exclude_run_prefix="loop-x-gate-")
        out[accept] = take_snapshot(accepted, set(), old_share=0.3, seed="s", table_version=None).episode_ids
    return out


def _post(url: str, token: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}/v1/feedback", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=120)


def test_fabricated_feedback_cannot_change_what_the_loop_trains_on(cluster):
    from rollout.store import TrajectoryStore

    store = TrajectoryStore(str(cluster.store))
    store.write_episodes("rollout-base", make_episodes("rollout-base", 40))
    before = _snapshots(store)
    assert before["oracle"] and before["validator"]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda n: _post(cluster.direct_url, FEEDBACK_TOKEN, fabricated_body(n)),
                                range(N_FABRICATED)))
    seconds = time.perf_counter() - t0
    assert [a.status_code for a in answers] == [200] * N_FABRICATED, answers[0].text
    assert {a.json()["verdict"] for a in answers} == {"serve-feedback:disagrees"}
    after = _snapshots(TrajectoryStore(str(cluster.store)))
    assert after == before  # not one fabricated episode reaches a dataset
    stored = {e.episode_id: e for e in store.read_episodes(["serve-feedback"]) if e.episode_id.startswith("mallory:")}
    assert len(stored) == N_FABRICATED  # stored, as evidence, under the key's name ...
    assert all(e.success_validator is False and e.success_oracle is False for e in stored.values())  # never as success
    assert {s.agent_id for e in stored.values() for s in e.steps} == {19}
    ledger = _ledger(cluster.store)
    rows = [r for r in ledger if r["key"] == "mallory"]
    assert len(rows) == N_FABRICATED and all(r["claimed_validator"] is True and r["verified_validator"] is False
                                             for r in rows)
    # batched: far fewer commits (provenance documents) than episodes
    assert len({r["file"] for r in rows}) <= N_FABRICATED // 5
    print(f"\n{N_FABRICATED} fabricated episodes answered in {seconds:.1f} s; "
          f"{len({r['file'] for r in rows})} commits; datasets unchanged")


def _ledger(store_dir: Path) -> list[dict]:
    rows = []
    for path in sorted((store_dir / "feedback" / "serve-feedback").glob("*.json")):
        rows.extend({**r, "file": path.name} for r in json.loads(path.read_text()))
    return rows


def test_feedback_needs_the_feedback_role(cluster):
    decision_only = STALL_KEY.split("=", 1)[1]
    r = _post(cluster.direct_url, decision_only, fabricated_body(9001))
    assert r.status_code == 403 and r.json()["error"] == "forbidden", r.text
    decide = httpx.post(f"{cluster.direct_url}/v1/decide", json=fabricated_body(1)["steps"][0]["state"],
                        headers={"Authorization": f"Bearer {FEEDBACK_TOKEN}"}, timeout=30)
    assert decide.status_code == 403  # a feedback key does not decide


def test_another_key_cannot_squat_an_episode_id(cluster):
    body = fabricated_body(4242)
    body["episode_id"] = "genuine-episode-7"
    squatter = _post(cluster.direct_url, FEEDBACK_TOKEN, body)
    assert squatter.status_code == 200
    genuine = fabricated_body(4242)
    genuine["episode_id"] = "genuine-episode-7"
    genuine["steps"][0]["agent_id"] = 3  # different content, same ID, another key
    owner = _post(cluster.direct_url, API_KEY, genuine)
    assert owner.status_code == 200 and owner.json()["stored"] is True, owner.text
    assert owner.json()["stored_id"] != squatter.json()["stored_id"]


def test_per_key_feedback_quota(cluster):
    """`tight` allows 3 episodes per key and hour (keyless: the local caller is the key)."""
    codes = [httpx.post(f"{cluster.tight_url}/v1/feedback", json=fabricated_body(7000 + n), timeout=60).status_code
             for n in range(4)]
    assert codes[:3] == [200, 200, 200]
    over = httpx.post(f"{cluster.tight_url}/v1/feedback", json=fabricated_body(7100), timeout=60)
    assert over.status_code == 429 and over.json()["error"] == "over_quota" and int(over.headers["retry-after"]) >= 1
    # a repeat of a stored episode is not charged again
    assert httpx.post(f"{cluster.tight_url}/v1/feedback", json=fabricated_body(7000), timeout=60).status_code == 200

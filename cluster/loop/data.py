"""What the loop trains on: accepted episodes in the store, split into new and already-used.

An episode counts when it was accepted (oracle or validator verdict), produced with the loop's
LLM backend (simulated data never mixes with real-LLM data), is not on a held-out task and is
not one of the loop's own gate episodes. "New" means not used by an earlier cycle; each cycle's
dataset is all new episodes plus a seeded sample of older ones (`old_data_share` of the total).
The chosen episode IDs are written next to the event log with the store's table version, so a
model can be traced to, and rebuilt from, exactly the data it was trained on.

Episodes that came in through /v1/feedback are evidence, not truth: only those the service
re-verified (code_version `serve-feedback:verified`, serve/feedback_verify.py) count, and no single
key's episodes make up more than `max_key_share` of a dataset (their stored IDs are `KEY:ID`).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any

from rollout.core.trajectory import EpisodeRecord
from rollout.store import TrajectoryStore
from serve.feedback_verify import FEEDBACK_CODE, VERIFIED

# The most of one dataset that one feedback key's episodes may make up.
DEFAULT_MAX_KEY_SHARE = 0.2


@dataclass(frozen=True)
class AcceptedEpisode:
    episode_id: str
    run_id: str
    task_id: str
    source: str = ""  # the feedback key that sent it; "" for the loop's and jobs' own rollouts


@dataclass
class Snapshot:
    new: list[str]  # episode IDs first used in this cycle
    old: list[str]  # episode IDs sampled from earlier cycles
    runs: list[str]  # runs the episodes come from
    table_version: int | None  # Delta table version the selection was made at

    @property
    def episode_ids(self) -> list[str]:
        return sorted(self.new + self.old)

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.episode_ids).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"new": self.new, "old": self.old, "runs": self.runs, "table_version": self.table_version}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        return cls(list(data["new"]), list(data["old"]), list(data["runs"]), data["table_version"])


def accepted_episodes(store: TrajectoryStore, *, accept_filter: str, llm_backend: str,
                      exclude_tasks: set[str], exclude_run_prefix: str) -> dict[str, AcceptedEpisode]:
    verdict = "success_oracle" if accept_filter == "oracle" else "success_validator"
    table = store.read_table(columns=["run_id", "episode_id", "task_id", "llm_backend", "code_version", verdict])
    out: dict[str, AcceptedEpisode] = {}
    for row in table.to_pylist():  # one row per step; episode fields repeat on each
        if row["episode_id"] in out:
            continue
        source = feedback_source(row)
        if source is None:
            continue
        if (row[verdict] is True and row["llm_backend"] == llm_backend and row["task_id"] not in exclude_tasks
                and not row["run_id"].startswith(exclude_run_prefix)):
            out[row["episode_id"]] = AcceptedEpisode(row["episode_id"], row["run_id"], row["task_id"], source)
    return out


def feedback_source(row: dict[str, Any]) -> str | None:
    """"" for an episode the platform produced itself; the sending key for verified feedback;
    None for feedback that is not verified (unchecked older feedback, or claims that disagreed)."""
    code = row.get("code_version") or ""
    if not code.startswith(FEEDBACK_CODE):
        return ""
    if code != VERIFIED:
        return None
    return str(row["episode_id"]).split(":", 1)[0]


def take_snapshot(accepted: dict[str, AcceptedEpisode], used_before: set[str], *, old_share: float,
                  seed: str, table_version: int | None,
                  max_key_share: float = DEFAULT_MAX_KEY_SHARE) -> Snapshot:
    new = sorted(set(accepted) - used_before)
    old_pool = sorted(set(accepted) & used_before)
    want_old = round(old_share / (1.0 - old_share) * len(new)) if old_share > 0 else 0
    old = sorted(random.Random(seed).sample(old_pool, min(want_old, len(old_pool))))
    keep = cap_key_share(new + old, accepted, max_key_share, seed)
    new, old = [e for e in new if e in keep], [e for e in old if e in keep]
    runs = sorted({accepted[e].run_id for e in new + old})
    return Snapshot(new, old, runs, table_version)


def cap_key_share(chosen: list[str], accepted: dict[str, AcceptedEpisode], share: float, seed: str) -> set[str]:
    """`chosen` less a seeded sample of each feedback key's excess: one key's episodes are at most
    `share` of what remains (with nothing else chosen, a key gets nothing)."""
    by_key: dict[str, list[str]] = {}
    for e in chosen:
        if accepted[e].source:
            by_key.setdefault(accepted[e].source, []).append(e)
    keep = set(chosen)
    for key, ids in sorted(by_key.items()):
        others = len(keep) - len(ids)
        allowed = int(share / (1.0 - share) * others) if share < 1.0 else len(ids)
        if len(ids) > allowed:
            dropped = random.Random(f"{seed}-{key}").sample(sorted(ids), len(ids) - allowed)
            keep -= set(dropped)
    return keep


def load_snapshot_episodes(store: TrajectoryStore, snapshot: Snapshot) -> list[EpisodeRecord]:
    wanted = set(snapshot.episode_ids)
    episodes = [e for e in store.read_episodes(snapshot.runs) if e.episode_id in wanted]
    missing = wanted - {e.episode_id for e in episodes}
    if missing:
        raise RuntimeError(f"{len(missing)} episode(s) of the dataset are no longer in the store "
                           f"(e.g. {sorted(missing)[0]}); was the table vacuumed?")
    return sorted(episodes, key=lambda e: e.episode_id)

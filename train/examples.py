"""Supervised examples from trajectories: (state the policy saw, agent the teacher chose).

Filtering keeps episodes whose final plan the chosen check accepts (validator or oracle), drops
steps decided by the rules layer (is_hardcoded), and de-duplicates identical (state, agent)
pairs. Of a search episode (rollout/policies/search.py) only the chosen path is read: the branches
it explored and left are not what led to the answer. The train/validation split is by task, so
no task appears on both sides.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from rollout.core.agent_table import NUM_AGENTS
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, StepRecord

FilterName = Literal["validator", "oracle", "none"]
FILTERS: tuple[str, ...] = ("validator", "oracle", "none")


@dataclass
class Example:
    example_id: str
    episode_id: str
    run_id: str
    task_id: str
    family: str
    domain_name: str
    step: int
    state_json: str
    agent_id: int
    decided_by: str
    llm_backend: str
    augmentation: str = ""  # "" for the original; otherwise how it was derived
    split: str = "train"

    @property
    def state(self) -> EpisodeState:
        return EpisodeState.from_json(self.state_json)


@dataclass
class FilterCounts:
    episodes_in: int = 0
    episodes_accepted: int = 0
    episodes_costly: int = 0
    steps_in: int = 0
    steps_hardcoded: int = 0
    steps_idle: int = 0
    steps_no_progress: int = 0
    steps_relabelled: int = 0
    steps_unrepaired: int = 0
    steps_off_path: int = 0
    steps_kept: int = 0
    duplicates_dropped: int = 0


def episode_accepted(ep: EpisodeRecord, check: str) -> bool:
    if ep.error:
        return False
    if check == "validator":
        return bool(ep.success_validator)
    if check == "oracle":
        return ep.success_oracle is True
    if check == "none":
        return True
    raise ValueError(f"unknown filter {check!r} (choose from {', '.join(FILTERS)})")


def example_id_for(state_json: str, agent_id: int, augmentation: str = "") -> str:
    return hashlib.sha1(f"{state_json}\x00{agent_id}\x00{augmentation}".encode()).hexdigest()[:16]


def _cheap_enough(accepted: list[EpisodeRecord]) -> set[str]:
    """Per task, the accepted episodes with at most the median number of LLM calls."""
    by_task: dict[str, list[EpisodeRecord]] = {}
    for ep in accepted:
        by_task.setdefault(ep.task_id, []).append(ep)
    keep: set[str] = set()
    for eps in by_task.values():
        calls = sorted(e.total_llm_calls for e in eps)
        median = calls[(len(calls) - 1) // 2]
        keep.update(e.episode_id for e in eps if e.total_llm_calls <= median)
    return keep


def idle_step(st: StepRecord) -> bool:
    """The step's agent left the domain, problem and plan exactly as they were (visible in the
    record, no hidden knowledge): the decision moved the episode nowhere."""
    before = json.loads(st.state_json)
    return (st.domain_after == before.get("domain", "") and st.problem_after == before.get("problem", "")
            and st.plan_after == before.get("plan", ""))


_NUMBER_RE = re.compile(r"\d+")


def validator_verdict(state_json: str) -> tuple[str, frozenset[str]]:
    """What the validator said about a state: its error category and its error lines with the
    numbers (lines, columns, steps) blanked, so an edit that only moves text is no progress."""
    state = json.loads(state_json)
    lines = state.get("validator_errors", "").splitlines()
    return state.get("error_category", ""), frozenset(_NUMBER_RE.sub("#", ln).strip() for ln in lines if "error" in ln)


def progress_step(ep: EpisodeRecord, index: int) -> bool:
    """The step-level verifier signal: after step `index` the plan validated, or the validator's
    verdict on the next state differs from the one the decision was made on (the error it
    reported was repaired or changed). Read from the record, no hidden knowledge."""
    st = ep.steps[index]
    if st.plan_valid:
        return True
    if index + 1 >= len(ep.steps):
        return False
    return validator_verdict(ep.steps[index + 1].state_json) != validator_verdict(st.state_json)


def _progress_flags(ep: EpisodeRecord, verdicts: list[tuple[str, frozenset[str]]]) -> list[bool]:
    """`progress_step` of every step, from verdicts read once per state."""
    return [st.plan_valid or (i + 1 < len(verdicts) and verdicts[i + 1] != verdicts[i])
            for i, st in enumerate(ep.steps)]


def hindsight_labels(ep: EpisodeRecord) -> dict[int, int]:
    """Hindsight relabelling from the verifier: for a model step after which the validator shows no
    progress (`progress_step` false), the agent of the first later model step, in the same verdict
    (the validator's verdict unchanged in between), after which it does show progress. So a wasted
    decision is labelled with the agent that did move the episode from that same situation.
    Steps after which no later step made progress from that verdict map to -1 (no useful label).
    Read from the record: the validator's and parser's verdicts, no hidden knowledge."""
    labels: dict[int, int] = {}
    verdicts = [validator_verdict(st.state_json) for st in ep.steps]
    progress = _progress_flags(ep, verdicts)
    for i, st in enumerate(ep.steps):
        if st.is_hardcoded or progress[i]:
            continue
        verdict, label = verdicts[i], -1
        for j in range(i + 1, len(ep.steps)):
            later = ep.steps[j]
            if verdicts[j] != verdict:
                break
            if not later.is_hardcoded and progress[j] and 0 <= later.agent_id < NUM_AGENTS:
                label = later.agent_id
                break
        labels[i] = label
    return labels


def chosen_path(ep: EpisodeRecord, counts: FilterCounts) -> EpisodeRecord:
    """The episode with only its chosen path's steps (all of a plain episode's; a search episode's
    explored branches dropped and counted). Records older than search trees read on_path=True."""
    path = [st for st in ep.steps if st.on_path is not False]
    if len(path) == len(ep.steps):
        return ep
    counts.steps_off_path += len(ep.steps) - len(path)
    return replace(ep, steps=path)


def select_examples(episodes: Iterable[EpisodeRecord], check: str = "validator",
                    counts: FilterCounts | None = None, *, prefer_cheap: bool = False,
                    drop_idle: bool = False, progress_only: bool = False,
                    hindsight: bool = False) -> list[Example]:
    """Examples from accepted episodes. `prefer_cheap` also drops, per task, the accepted episodes
    that needed more LLM calls than that task's median: the student then imitates the teacher's
    efficient successes rather than its detours. `drop_idle` drops the steps whose agent changed
    nothing (`idle_step`), so the labels are the decisions that moved the episode.
    `progress_only` (the step-level verifier filter) keeps only steps after which the validator
    shows progress (`progress_step`). `hindsight` relabels a step without progress with the agent
    that later made progress from the same verdict (`hindsight_labels`) and drops the step when none
    did; it replaces `drop_idle` and `progress_only` for those steps."""
    counts = counts if counts is not None else FilterCounts()
    seen: set[str] = set()
    out: list[Example] = []
    episodes = list(episodes)
    accepted = [ep for ep in episodes if episode_accepted(ep, check)]
    cheap = _cheap_enough(accepted) if prefer_cheap else None
    counts.episodes_in += len(episodes)
    counts.steps_in += sum(len(ep.steps) for ep in episodes)
    counts.episodes_accepted += len(accepted)
    for ep in accepted:
        if cheap is not None and ep.episode_id not in cheap:
            counts.episodes_costly += 1
            continue
        ep = chosen_path(ep, counts)
        relabel = hindsight_labels(ep) if hindsight else {}
        for index, st in enumerate(ep.steps):
            if st.is_hardcoded:
                counts.steps_hardcoded += 1
                continue
            if not 0 <= st.agent_id < NUM_AGENTS:
                continue  # the dynamic agent is outside the model's vocabulary
            agent = relabel.get(index, st.agent_id)
            if agent < 0:
                counts.steps_unrepaired += 1
                continue
            counts.steps_relabelled += agent != st.agent_id
            if agent == st.agent_id and drop_idle and idle_step(st):
                counts.steps_idle += 1
                continue
            if index not in relabel and progress_only and not progress_step(ep, index):
                counts.steps_no_progress += 1
                continue
            key = example_id_for(st.state_json, agent)
            if key in seen:
                counts.duplicates_dropped += 1
                continue
            seen.add(key)
            out.append(Example(key, ep.episode_id, ep.run_id, ep.task_id, ep.family, ep.domain_name, st.step,
                               st.state_json, agent, st.decided_by, ep.llm_backend,
                               augmentation="hindsight" if agent != st.agent_id else ""))
    counts.steps_kept = len(out)
    return out


def split_by_task(examples: list[Example], val_fraction: float = 0.2, seed: int = 0) -> None:
    """Assign `split` in place; a task's examples all land on the same side."""
    tasks = sorted({e.task_id for e in examples})
    val = {t for t in tasks if zlib.crc32(f"{seed}:{t}".encode()) % 1000 < val_fraction * 1000}
    if len(tasks) >= 2 and val_fraction > 0:
        if not val:
            val = {min(tasks, key=lambda t: zlib.crc32(f"{seed}:{t}".encode()))}
        if val == set(tasks):
            val.discard(max(tasks, key=lambda t: zlib.crc32(f"{seed}:{t}".encode())))
    for e in examples:
        e.split = "validation" if e.task_id in val else "train"

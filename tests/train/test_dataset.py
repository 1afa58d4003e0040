from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from synthetic import synthetic_episodes

from rollout.store import TrajectoryStore
from train.dataset import BuildConfig, DatasetCard, DatasetError, build_dataset, load_examples, read_sources
from train.examples import FilterCounts, select_examples, split_by_task


def test_filters_dedup_and_split(tmp_path):
    episodes = synthetic_episodes(n_tasks=12, per_task=3, seed=3)
    dup = synthetic_episodes(n_tasks=12, per_task=3, seed=3, run_id="run-again")  # same states again
    for ep in dup:
        ep.episode_id += "-again"
    card = build_dataset(episodes + dup, tmp_path / "ds", BuildConfig(augment_copies=0))
    examples = load_examples(tmp_path / "ds")
    accepted = [ep for ep in episodes if ep.success_validator]
    expected = sum(1 for ep in accepted for s in ep.steps if not s.is_hardcoded)
    assert card.stages["rule steps dropped"] == 2 * len(accepted)
    assert card.stages["duplicates dropped"] == expected
    assert len(examples) == expected
    assert all(e.decided_by != "rule" for e in examples)
    train_tasks = {e.task_id for e in examples if e.split == "train"}
    val_tasks = {e.task_id for e in examples if e.split == "validation"}
    assert train_tasks and val_tasks and not train_tasks & val_tasks
    assert sum(c.get("train", 0) + c.get("validation", 0) for c in card.per_agent.values()) == len(examples)
    table = card.table()
    assert "| filter stage | count |" in table and "classical/blocks" in table
    assert json.loads((tmp_path / "ds" / "dataset_card.json").read_text())["dataset_version"] == card.dataset_version


def test_oracle_filter_is_stricter():
    episodes = synthetic_episodes(n_tasks=20, seed=4)
    by_validator = select_examples(episodes, "validator")
    by_oracle = select_examples(episodes, "oracle")
    assert 0 < len(by_oracle) < len(by_validator)
    oracle_ok = {ep.episode_id for ep in episodes if ep.success_oracle}
    assert {e.episode_id for e in by_oracle} <= oracle_ok


def test_split_keeps_tasks_whole():
    examples = select_examples(synthetic_episodes(n_tasks=30, seed=5))
    split_by_task(examples, 0.3)
    sides: dict[str, set[str]] = {}
    for e in examples:
        sides.setdefault(e.task_id, set()).add(e.split)
    assert all(len(s) == 1 for s in sides.values())


def test_encoded_prompts_for_tokenizer(tmp_path, smollm2_path):
    card = build_dataset(synthetic_episodes(n_tasks=6, seed=6), tmp_path / "ds",
                         BuildConfig(augment_copies=0, tokenizer_dir=str(smollm2_path)))
    assert card.label_map[10] == " K" and card.tokenizer.startswith("smollm2-135m:49152")
    rows = pq.read_table(tmp_path / "ds" / "train.parquet").to_pylist()
    assert rows[0]["prompt"].endswith("Selected Agent:") and rows[0]["prompt"].startswith("<|im_start|>")
    assert rows[0]["label"] == card.label_map[rows[0]["agent_id"]]


def test_empty_dataset_stops_clearly(tmp_path):
    with pytest.raises(DatasetError, match="empty dataset"):
        build_dataset(synthetic_episodes(n_tasks=4, accepted_fraction=0.0), tmp_path / "ds")
    assert not (tmp_path / "ds" / "train.parquet").exists()


def test_reads_runs_from_the_store(tmp_path):
    store = TrajectoryStore(str(tmp_path / "store"))
    store.write_episodes("run-a", synthetic_episodes(n_tasks=5, seed=7, run_id="run-a"))
    episodes = read_sources([f"{tmp_path}/store/run-a"])
    assert len(episodes) == 15
    card = build_dataset(episodes, tmp_path / "ds", BuildConfig(augment_copies=0), sources=["store/run-a"])
    assert card.sources == ["store/run-a"] and card.llm_backends == ["sim"]
    with pytest.raises(DatasetError, match="no run"):
        read_sources([f"{tmp_path}/store/run-missing"])
    with pytest.raises(DatasetError, match="STORE/RUN"):
        read_sources(["justarun"])
    assert DatasetCard.load(tmp_path / "ds").dataset_version == card.dataset_version


def test_drop_idle_keeps_only_steps_that_changed_something():
    episodes = synthetic_episodes(n_tasks=10, seed=5)
    idle = 0
    for ep in episodes:
        for i, st in enumerate(ep.steps):
            before = json.loads(st.state_json)
            if st.is_hardcoded or i % 2:  # odd steps changed the plan; even ones left everything as it was
                st.domain_after, st.problem_after, st.plan_after = before["domain"], before["problem"], "(x)\n"
            else:
                st.domain_after, st.problem_after, st.plan_after = before["domain"], before["problem"], before["plan"]
                idle += ep.success_validator
    kept = select_examples(episodes, "validator")
    counts = FilterCounts()
    moving = select_examples(episodes, "validator", counts, drop_idle=True)
    assert idle and counts.steps_idle == idle
    assert {e.example_id for e in moving} == {e.example_id for e in kept if e.step % 2}


def test_progress_only_keeps_steps_after_which_the_validator_verdict_moved():
    from train.examples import progress_step

    episodes = [ep for ep in synthetic_episodes(n_tasks=8, seed=6) if ep.success_validator and len(ep.steps) >= 3]
    for ep in episodes:
        verdict = "plan.txt:3: error: step 3 (pick a) precondition false [validate.precondition_failed]"
        for i, st in enumerate(ep.steps):
            state = json.loads(st.state_json)
            # steps 0 and 1 see the same error (line numbers aside): step 0 made no progress
            state["validator_errors"] = verdict.replace("3", str(i + 2)) if i < 2 else f"error: fault {chr(97 + i)}"
            state["error_category"] = "plan_invalid"
            st.state_json = json.dumps(state)
            st.plan_valid = i == len(ep.steps) - 1
    assert all(not progress_step(ep, 0) and progress_step(ep, 1) and progress_step(ep, len(ep.steps) - 1)
               for ep in episodes)
    counts = FilterCounts()
    kept = select_examples(episodes, "validator", counts, progress_only=True)
    dropped = sum(not ep.steps[0].is_hardcoded for ep in episodes)
    assert dropped and counts.steps_no_progress == dropped
    assert {e.step for e in kept} <= {st.step for ep in episodes for st in ep.steps[1:]}


def test_hindsight_relabels_a_wasted_step_with_the_agent_that_moved_the_same_verdict():
    from train.examples import hindsight_labels

    episodes = [ep for ep in synthetic_episodes(n_tasks=8, seed=6) if ep.success_validator and len(ep.steps) >= 3]
    for ep in episodes:
        for i, st in enumerate(ep.steps):
            state = json.loads(st.state_json)
            # steps 0 and 1 see the same verdict; step 1 moved it; the last step validated
            state["validator_errors"] = ("error: fault a [validate.precondition_failed]" if i < 2
                                         else f"error: fault {chr(98 + i)}")
            state["error_category"] = "plan_invalid"
            st.state_json = json.dumps(state)
            st.plan_valid = i == len(ep.steps) - 1
            st.is_hardcoded = False
            st.agent_id = 4 if i == 0 else 20 if i == 1 else 9
    assert all(hindsight_labels(ep) == {0: 20} for ep in episodes)
    counts = FilterCounts()
    kept = select_examples(episodes, "validator", counts, hindsight=True)
    assert counts.steps_relabelled == len(episodes)
    step0 = [e for e in kept if e.step == episodes[0].steps[0].step and e.episode_id == episodes[0].episode_id]
    assert [(e.agent_id, e.augmentation) for e in step0] == [(20, "hindsight")]
    # a wasted step no later model step repaired is dropped, not relabelled (rule steps do not count)
    for ep in episodes:
        ep.steps[1].is_hardcoded = True
    counts = FilterCounts()
    select_examples(episodes, "validator", counts, hindsight=True)
    assert counts.steps_relabelled == 0 and counts.steps_unrepaired == len(episodes)

"""DAgger-style labels (train/dagger.py) in the real simulated world with real planners and
validators: asking the teacher never changes the student's episode, the labels are the teacher's
choices at the student's states, and the aggregated dataset and the retrained policy hold them."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from rollout.tasks.loaders import load_tasks
from train.dagger import (
    DAGGER_AUGMENTATION,
    DaggerError,
    DaggerRound,
    DaggerSettings,
    LabellingStudent,
    label_examples,
    labelled_episodes,
    run_dagger,
)
from train.dataset import BuildConfig, build_examples, load_examples, write_dataset
from train.fast_policy import train_fast_policy_dir
from train.pipeline import run_policy

TEACHER = "rules+teacher:model=sim"
# what differs between two runs of the same episode: the wall clock (fields, and the planner's own
# timings and peak memory in its log)
CLOCK_FIELDS = {"wall_s", "created_at", "decision_latency_ms", "latency_ms", "solver_cpu_s", "episode_id", "run_id"}
CLOCK_TEXT = re.compile(r"\d+(?:\.\d+)?(?:s|ms| ?KB)\b")


def _comparable(record) -> str:  # noqa: ANN001  (an EpisodeRecord)
    data = dataclasses.asdict(record)
    for key in CLOCK_FIELDS:
        data.pop(key, None)
    for step in data["steps"]:
        for key in CLOCK_FIELDS:
            step.pop(key, None)
    return CLOCK_TEXT.sub("#", json.dumps(data, sort_keys=True, default=str))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Teacher episodes on a few tasks, the fast policy trained on them (the DAgger starting point)."""
    tasks = [t for t in load_tasks("planbench:all:2,ipc:bundled") if t.gold_domain and t.gold_problem][:10]
    out = tmp_path_factory.mktemp("dagger")
    episodes = run_policy(tasks, TEACHER, [10_000, 10_001], "t", 8).records
    build = BuildConfig(drop_idle=True, augment_copies=0)
    examples, stages = build_examples(episodes, build)
    write_dataset(examples, stages, out / "data", config=build, sources=["t"])
    train_fast_policy_dir(out / "data", out / "model", name="base", retry_discount=0.5)
    return tasks, out


def test_labelling_does_not_change_the_students_episodes(world):
    tasks, out = world
    seeds = [30_001, 30_002]
    plain = run_policy(tasks, f"rules+model:{out / 'model'}", seeds, "s", 8).records
    for check in ("none", "progress"):
        labelled = labelled_episodes(tasks, f"rules+model:{out / 'model'}", TEACHER, seeds, "s", 8, check=check)
        assert [_comparable(le.record) for le in labelled] == [_comparable(r) for r in plain]
        labels = [lab for le in labelled for lab in le.labels]
        model_steps = [s for r in plain for s in r.steps if s.decided_by == "model"]
        assert labels and len(labels) == len(model_steps)
        # no labelling call was charged to the student's episodes (their calls are the plain run's)
        assert [le.record.total_llm_calls for le in labelled] == [r.total_llm_calls for r in plain]
        # every labelled state is the state the student decided on at that step
        for le in labelled:
            steps = {s.step: s for s in le.record.steps}
            for lab in le.labels:
                assert steps[lab.step].state_json == lab.state_json
                assert steps[lab.step].agent_id == lab.student_agent
                assert lab.llm_calls >= 1 and lab.decided_by in ("teacher", "fallback")
                assert (lab.progress is None) == (check == "none")
        if check == "progress":  # the fork check saw the label's agent both move and not move the verdict
            assert {lab.progress for lab in labels} == {True, False}


def test_labels_are_the_teachers_choices(world):
    """With beta 1 the teacher's label is what runs, so the episode is the teacher's own episode
    (its answers are seeded per state) and each label is the agent the teacher ran there."""
    tasks, out = world
    seeds = [10_000]
    teacher_run = run_policy(tasks, TEACHER, seeds, "t", 8).records
    labelled = labelled_episodes(tasks, f"rules+model:{out / 'model'}", TEACHER, seeds, "t", 8, beta=1.0)
    for le, ref in zip(labelled, teacher_run, strict=True):
        assert [s.agent_id for s in le.record.steps] == [s.agent_id for s in ref.steps]
        assert le.record.success_oracle == ref.success_oracle
        taught = {s.step: s.agent_id for s in ref.steps if s.decided_by in ("teacher", "fallback")}
        assert {lab.step: lab.agent_id for lab in le.labels} == taught
    assert any(lab.agent_id != lab.student_agent for le in labelled for lab in le.labels)


def test_aggregated_dataset_holds_the_labels_and_the_policy_is_retrained(world, tmp_path):
    tasks, out = world
    settings = DaggerSettings(rounds=2, concurrency=8)
    result = run_dagger(out / "data", out / "model", tasks, 1, tmp_path, settings, log=lambda _: None)
    assert [r.round for r in result.rounds] == [1, 2] and result.model_dir == tmp_path / "round-2" / "model"
    data = load_examples(tmp_path / "round-2" / "data")
    base = load_examples(out / "data")
    added = [e for e in data if e.augmentation == DAGGER_AUGMENTATION]
    assert len(added) == sum(r.examples_added for r in result.rounds) > 0
    assert len(data) == len(base) + len(added)
    first = load_examples(tmp_path / "round-1" / "data")  # round 2 aggregates round 1's labels
    assert {e.example_id for e in first} <= {e.example_id for e in data}
    for r in result.rounds:
        assert r.labelled_steps >= r.examples_added and r.label_calls >= r.labelled_steps
        assert r.calls_per_label >= 1.0 and 0.0 <= r.agreement <= 1.0
    from train.manifest import Manifest

    manifest = Manifest.load(result.model_dir)
    assert manifest.extra["retry_discount"] == 0.5  # the base model's decision settings carry over
    assert manifest.metrics["train_examples"] > Manifest.load(out / "model").metrics["train_examples"]
    assert "round 1" in result.stages() and result.stages()["round 1"]["calls per label"] >= 1.0


def test_label_examples_keep_failed_episodes_and_filter_by_the_check(world):
    tasks, out = world
    labelled = labelled_episodes(tasks, f"rules+model:{out / 'model'}", TEACHER, [30_003], "s", 8, check="progress")
    every = label_examples(labelled, "none", DaggerRound(1))
    failed = {le.record.episode_id for le in labelled if not le.record.success_validator}
    counts = DaggerRound(1)
    checked = label_examples(labelled, "progress", counts)
    assert {e.episode_id for e in every} & failed or not failed  # labels from failed episodes are kept
    assert len(checked) < len(every) and counts.labels_unchecked_dropped > 0
    assert all(e.augmentation == DAGGER_AUGMENTATION for e in every)


def test_bad_settings_are_refused(world):
    tasks, out = world
    with pytest.raises(DaggerError, match="check must be one of"):
        DaggerSettings(check="maybe").validate()
    with pytest.raises(DaggerError, match="beta must be in"):
        DaggerSettings(beta=1.5).validate()
    with pytest.raises(DaggerError, match="rounds must be"):
        DaggerSettings(rounds=-1).validate()
    from rollout.policies import make_policy

    with pytest.raises(DaggerError, match="check must be one of"):
        LabellingStudent(make_policy("rules+random"), make_policy(TEACHER), check="x")


def test_pipeline_has_the_dagger_stage_and_the_row_without_it(tmp_path):
    from train.pipeline import FAST_PAIRED_KEY, NO_DAGGER_LABEL, PAIRED_KEY, PipelineConfig, PipelineError, run_pipeline

    cfg = PipelineConfig(out=str(tmp_path), tasks="planbench:all:2,ipc:bundled", train_seeds=1, eval_seeds=1,
                         ablations=False, cross_domain=False, stronger="", vanilla=False, dynamic_ablation=False,
                         concurrency=8, dagger_rounds=1, exit_iterations=0, table2_min_pairs=0)
    result = run_pipeline(cfg, log=lambda _: None)
    rows = {(r.family, r.policy): r for r in result.comparison}
    assert rows[("all", NO_DAGGER_LABEL)].episodes == rows[("all", "fast policy")].episodes > 0
    assert NO_DAGGER_LABEL in result.stages[PAIRED_KEY] and NO_DAGGER_LABEL in result.stages[FAST_PAIRED_KEY]
    stages = next(v for k, v in result.stages.items() if k.startswith("DAgger"))
    assert stages["round 1"]["labelled_steps"] > 0 and stages["round 1"]["calls per label"] >= 1.0
    assert (tmp_path / "dagger" / "round-1" / "model" / "manifest.json").is_file()
    for bad, message in (({"dagger_rounds": -1}, "rounds must be"), ({"dagger_check": "x"}, "check must be")):
        with pytest.raises(PipelineError, match=message):
            PipelineConfig(out=str(tmp_path), **bad).check()

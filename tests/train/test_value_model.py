"""The search's value model (train/value_model.py) and `halo train --value`: what it learns from,
that it ranks held-out successful states above failed ones, the artifact's round trip, and the
one-line errors on bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from synthetic import synthetic_episodes
from typer.testing import CliRunner

from cluster.cli import app
from rollout.store import TrajectoryStore
from tests.value_records import value_episodes
from train.fast_policy import train_fast_policy
from train.features import FEATURE_VERSION
from train.manifest import Manifest, ManifestError
from train.value_model import (
    VALUE_CLASS,
    WEIGHTS_FILE,
    ValueDataError,
    auc,
    data_hash,
    held_out_tasks,
    load_value_model,
    train_value_model,
    value_examples,
)

runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Manifest]:
    out = tmp_path_factory.mktemp("value") / "model"
    return out, train_value_model(value_episodes(n_tasks=40, seed=1), out, name="v")


def test_auc_counts_pairs_ranked_right_and_ties_half() -> None:
    assert auc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    assert auc([0.1, 0.2, 0.9, 0.8], [True, True, False, False]) == 0.0
    assert auc([0.5, 0.5, 0.5], [True, False, False]) == 0.5
    assert np.isnan(auc([0.3, 0.4], [True, True]))


def test_examples_include_failed_episodes_and_skip_broken_ones_and_off_path_steps() -> None:
    episodes = value_episodes(n_tasks=4, seed=2)
    good, bad = episodes[0], episodes[1]
    broken = replace(bad, episode_id="broken", error="Traceback: a bug")
    infra = replace(bad, episode_id="infra", infra_error="endpoint down")
    no_gold = replace(bad, episode_id="no-gold", success_oracle=None)
    branch = replace(good, episode_id="tree", steps=[*good.steps[:1], replace(good.steps[1], on_path=False)])
    repeated = replace(good, episode_id="again", steps=[good.steps[0], good.steps[0]])
    examples = value_examples([good, bad, broken, infra, no_gold, branch, repeated])
    by_episode = {e.episode_id: [x for x in examples if x.episode_id == e.episode_id] for e in (good, bad)}
    assert {e.episode_id for e in examples} == {good.episode_id, bad.episode_id, "tree", "again"}
    assert len(by_episode[good.episode_id]) == len({s.state_json for s in good.steps})
    assert {x.success for x in examples if x.episode_id == bad.episode_id} == {bool(bad.success_oracle)}
    assert len([x for x in examples if x.episode_id == "tree"]) == 1  # the branch left is not read
    assert len([x for x in examples if x.episode_id == "again"]) == 1  # a repeated state counts once
    assert any(not x.success for x in examples) and any(x.success for x in examples)


def test_held_out_successful_states_rank_above_failed_ones(trained: tuple[Path, Manifest]) -> None:
    out, manifest = trained
    model = load_value_model(out)
    examples = value_examples(value_episodes(n_tasks=40, seed=1))
    held = held_out_tasks({e.task_id for e in examples}, manifest.extra["held_out_share"])
    test = [e for e in examples if e.task_id in held]
    preds = [model.predict(e.state) for e in test]
    labels = [e.success for e in test]
    win = np.mean([p for p, y in zip(preds, labels, strict=True) if y])
    lose = np.mean([p for p, y in zip(preds, labels, strict=True) if not y])
    assert win > lose + 0.2
    assert auc(preds, labels) == pytest.approx(manifest.metrics["held_out_auc"])
    assert manifest.metrics["held_out_auc"] > 0.75
    assert manifest.metrics["held_out_brier"] < manifest.metrics["held_out_brier_base_rate"]
    # episodes from the same generator never seen in training: still ranked the right way round
    fresh = value_examples(value_episodes(n_tasks=20, seed=99))
    assert auc([model.predict(e.state) for e in fresh], [e.success for e in fresh]) > 0.75


def test_the_artifact_round_trips_and_names_what_it_is(trained: tuple[Path, Manifest]) -> None:
    out, manifest = trained
    stored = json.loads((out / "manifest.json").read_text())
    assert stored["policy_class"] == VALUE_CLASS and stored["extra"]["feature_version"] == FEATURE_VERSION
    assert stored["extra"]["target"] == "success_oracle"
    examples = value_examples(value_episodes(n_tasks=40, seed=1))
    held = held_out_tasks({e.task_id for e in examples}, 0.2)
    assert stored["extra"]["training_data_sha256"] == data_hash([e for e in examples if e.task_id not in held])
    model = load_value_model(out)
    copy = out.parent / "copy"
    copy.mkdir()
    model.save(copy)
    manifest.save(copy)
    again = load_value_model(copy)
    for e in examples[:30]:
        assert 0.0 < model.predict(e.state) < 1.0
        assert again.predict(e.state) == model.predict(e.state)
    assert again.version == manifest.version


@pytest.mark.parametrize(("episodes", "message"), [
    ([], "no usable episodes"),
    (value_episodes(n_tasks=10, success_rate=1.0), "no failed episodes among 30"),
    (value_episodes(n_tasks=10, success_rate=0.0), "no successful episodes among 30"),
    (value_episodes(n_tasks=2, seed=4), "do not hold both successful and failed episodes"),
])
def test_bad_training_data_is_one_clear_line(episodes, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueDataError, match=message) as info:
        train_value_model(episodes, tmp_path / "m")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "m").exists()


def test_a_directory_that_is_not_a_value_model_is_refused(trained: tuple[Path, Manifest], tmp_path: Path) -> None:
    fast = tmp_path / "fast"
    train_fast_policy(synthetic_episodes(n_tasks=6, seed=3), fast)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text((trained[0] / "manifest.json").read_text())
    for directory, message in ((tmp_path / "nowhere", "no such directory"), (tmp_path, "no manifest"),
                               (fast, "'hashed_linear' artifact, not a value model"),
                               (broken, f"{WEIGHTS_FILE}: missing or unreadable")):
        with pytest.raises(ManifestError, match=message) as info:
            load_value_model(directory)
        assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("store")
    TrajectoryStore(str(root)).write_episodes("mixed", value_episodes(n_tasks=40, seed=1, run_id="mixed"))
    TrajectoryStore(str(root)).write_episodes("wins", value_episodes(n_tasks=5, success_rate=1.0, run_id="wins"))
    return root


def test_halo_train_value_builds_the_artifact(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "value-v1"
    result = runner.invoke(app, ["train", "--value", "--from", f"{store}/mixed", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "value_linear model value-v1" in result.output and "held_out_auc" in result.output
    assert load_value_model(out).name == "value-v1"
    assert Manifest.load(out).data_versions == [f"{store}/mixed"]


@pytest.mark.parametrize(("args", "message"), [
    (["--from", "{store}/wins"], "error: no failed episodes among 15"),
    (["--from", "{store}/nope"], "error: store {store}: no run(s) nope"),
    ([], "--value needs --from STORE/RUN"),
    (["--from", "{store}/mixed", "--data", "x"], "--data do not apply"),
])
def test_halo_train_value_bad_input_is_one_line(store: Path, tmp_path: Path, args: list[str], message: str) -> None:
    argv = ["train", "--value", "--out", str(tmp_path / "m"), *(a.format(store=store) for a in args)]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2
    assert message.format(store=store) in " ".join(result.output.split())
    assert "Traceback" not in result.output and not (tmp_path / "m").exists()


def test_the_state_feature_set_ignores_depth_and_history_and_round_trips(trained: tuple[Path, Manifest],
                                                                         tmp_path: Path) -> None:
    out = tmp_path / "state"
    manifest = train_value_model(value_episodes(n_tasks=40, seed=1), out, feature_set="state")
    assert manifest.extra["feature_set"] == "state" and manifest.metrics["held_out_auc"] > 0.75
    model = load_value_model(out)
    assert model.feature_set == "state"
    state = value_examples(value_episodes(n_tasks=2, seed=5))[3].state
    deeper = replace(state, step=9, history=[1, 3, 13, 13, 17, 20])
    assert model.predict(deeper) == model.predict(state)
    full = load_value_model(trained[0])  # the default set reads depth and history
    assert full.feature_set == "all" and full.predict(deeper) != full.predict(state)
    with pytest.raises(ValueDataError, match="feature set 'depth' unknown"):
        train_value_model(value_episodes(n_tasks=40, seed=1), tmp_path / "bad", feature_set="depth")

"""Warm-started fine-tuning on Ray Train: DDP over 2 workers matches 1 worker, and the artifact
loads through the training part's loader. (The warm start itself is checked in the end-to-end
test: cycle 2's model keeps every feature row of cycle 1's.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import ray

from cluster.loop.config import TrainSettings
from rollout.loop.episode import EpisodeConfig, run_episodes
from rollout.policies import make_policy
from rollout.tasks import load_tasks
from train.examples import select_examples, split_by_task
from train.fast_finetune import finetune_fast
from train.fast_policy import WEIGHTS_FILE, EmptyDatasetError, train_fast_policy
from train.manifest import Manifest
from train.policies import load_policy

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("ft")
    tasks = load_tasks("planbench:blocksworld:12")
    episodes = asyncio.run(run_episodes(tasks, make_policy("rules+scripted", seed=3),
                                        EpisodeConfig(seed=3, run_id="teacher"), concurrency=4))
    # The "serving" model: trained on less data (a few accepted episodes with model-decided steps).
    few = [e for e in episodes if e.success_oracle and any(not s.is_hardcoded for s in e.steps)][:3]
    assert few, "the teacher produced no accepted episode with a model-decided step"
    train_fast_policy(few, root / "serving", check="oracle")
    examples = select_examples(episodes, "oracle")
    split_by_task(examples, 0.25, 0)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield root, examples
    ray.shutdown()


def _weights(model_dir: Path) -> dict[int, np.ndarray]:
    with np.load(model_dir / WEIGHTS_FILE) as d:
        return {int(b): d["weights"][i] for i, b in enumerate(d["buckets"])} | {-1: d["bias"]}


def test_two_workers_match_one_and_the_artifact_loads(data) -> None:
    root, examples = data
    outs = {}
    for workers in (1, 2):
        out = root / f"w{workers}"
        manifest = finetune_fast(examples, out, init_dir=root / "serving", settings=TrainSettings(workers=workers,
                                 epochs=30), name="loop-t", version=f"w{workers}", data_versions=["teacher@v1"],
                                 storage_path=root / "ray_results")
        assert manifest.metrics["ray_train_workers"] == workers
        assert manifest.metrics["train_accuracy"] > 0.8
        assert manifest.extra["warm_start_from"] == str(root / "serving")
        assert Manifest.load(out).data_versions == ["teacher@v1"]
        policy = load_policy(out, rules_first=True)
        assert policy.decide(examples[0].state).agent_id in range(21)
        outs[workers] = _weights(out)
    one, two = outs[1], outs[2]
    assert one.keys() == two.keys()
    assert max(float(np.abs(one[k] - two[k]).max()) for k in one) < 0.05


def test_no_examples_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmptyDatasetError, match="no training examples"):
        finetune_fast([], tmp_path / "x", init_dir=None, settings=TrainSettings(), name="n", version="v",
                      data_versions=[], storage_path=tmp_path)


def test_supervised_then_rl_mode_gates_the_rl_candidate(data) -> None:
    """train.mode supervised+rl: RL (train/rl_loop.py) starts from this cycle's supervised
    candidate; the candidate written (and gated) is RL's, under the supervised one's name."""
    from cluster.loop.config import LoopConfig
    from cluster.loop.finetune import reinforce_fast

    root, examples = data
    sup = root / "c0001-supervised"
    finetune_fast(examples, sup, init_dir=root / "serving", settings=TrainSettings(epochs=10), name="loop-t",
                  version="c0001", data_versions=["teacher@v1"], storage_path=root / "ray_results")
    config = LoopConfig.from_dict({"tasks": "planbench:blocksworld:3", "llm": "sim:scale=0", "train": {
        "mode": "supervised+rl", "rl": {"iterations": 1, "tasks_per_iter": 2, "group": 2, "concurrency": 2}}})
    lines: list[str] = []
    manifest = reinforce_fast(sup, root / "c0001", config, 1, lines.append)
    assert (manifest.name, manifest.version) == ("loop-t", "c0001")
    assert manifest.metrics["rl_iterations"] == 1 and "train_accuracy" in manifest.metrics
    assert manifest.data_versions[0] == "teacher@v1" and any(line.startswith("  rl: iteration 1/1") for line in lines)
    assert not (root / "c0001" / "rl_checkpoints").exists()
    assert Manifest.load(root / "c0001").version == "c0001"
    assert load_policy(root / "c0001", rules_first=True).decide(examples[0].state).agent_id in range(21)

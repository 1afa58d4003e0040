"""benchmarks/value_within_task.py: the AUC pairs only states of one task and step (and verdict)."""

from __future__ import annotations

import pytest
from test_benchmark_exit_codes import _load

from rollout.core.state import EpisodeState
from train.value_model import ValueExample

_DOMAIN = "(define (domain d))"


def _example(task: str, step: int, success: bool, *, valid: bool = False) -> ValueExample:
    state = EpisodeState(task_description="t", domain=_DOMAIN, step=step, plan_valid=valid,
                         error_category="ok" if valid else "no_plan_found")
    return ValueExample(task, f"{task}-{step}-{success}-{valid}", state.to_json(), success)


def test_pairs_share_task_and_step_and_ties_count_half() -> None:
    bench = _load("value_within_task")
    examples = [_example("a", 1, True), _example("a", 1, False), _example("a", 2, False),
                _example("b", 1, True), _example("b", 1, False)]
    preds = [0.9, 0.1, 0.95, 0.5, 0.5]  # a/2 has no success at its step: not paired
    assert bench.paired_auc(examples, preds, same_verdict=False) == (2, pytest.approx(0.75))
    examples = [_example("a", 1, True, valid=True), _example("a", 1, False), _example("a", 1, False, valid=True)]
    assert bench.paired_auc(examples, [0.9, 0.95, 0.2], same_verdict=False) == (2, pytest.approx(0.5))
    assert bench.paired_auc(examples, [0.9, 0.95, 0.2], same_verdict=True) == (1, pytest.approx(1.0))
    pairs, auc = bench.paired_auc(examples[:1], [0.5], same_verdict=True)
    assert pairs == 0 and auc != auc  # no pair: NaN, not a number that looks like a result

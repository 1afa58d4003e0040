"""benchmarks/calls_floor.py's paired ratio and its lower bound, on hand-built episode counts."""

from __future__ import annotations

import math
import random

import pytest
from test_benchmark_exit_codes import _load


def test_a_ratio_with_no_spread_between_pairs_is_its_own_bound() -> None:
    ratio, lower = _load("calls_floor").paired_ratio([3.0, 5.0, 6.0], [6.0, 10.0, 12.0])
    assert ratio == pytest.approx(0.5)
    assert lower == pytest.approx(0.5)


def test_the_bound_sits_below_the_ratio_and_narrows_with_more_pairs() -> None:
    paired_ratio = _load("calls_floor").paired_ratio
    rng = random.Random(7)
    b = [float(rng.randint(6, 16)) for _ in range(400)]
    a = [0.6 * y + rng.gauss(0.0, 1.5) for y in b]
    ratio, lower = paired_ratio(a, b)
    small_ratio, small_lower = paired_ratio(a[:40], b[:40])
    assert ratio == pytest.approx(sum(a) / sum(b))
    assert 0.0 < ratio - lower < small_ratio - small_lower
    # the delta-method SE for a ratio of means: sd(a - r b) / (mean(b) sqrt(n))
    n, mb = len(b), sum(b) / len(b)
    resid = [x - ratio * y for x, y in zip(a, b, strict=True)]
    mean_r = sum(resid) / n
    sd = math.sqrt(sum((v - mean_r) ** 2 for v in resid) / (n - 1))
    assert ratio - lower == pytest.approx(1.645 * sd / mb / math.sqrt(n))

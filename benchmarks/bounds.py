"""Confidence bounds the serving benchmarks judge their targets by (not point estimates: the machine
is shared and one lucky run must not pass a target).

- `ratio_upper`: a bootstrap upper bound of quantile(a) / quantile(b) (latency against a floor or
  a baseline), resampling both samples.
- `mean_lower` / `mean_upper`: one-sided Student-t bounds of a mean (throughput over several
  windows; a stall over several rounds).
"""

from __future__ import annotations

import math
import random
import statistics

# One-sided 95% Student-t quantiles by degrees of freedom (beyond 30: the normal's 1.645).
_T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812,
        12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697}


def quantile(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank); NaN for no values."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def ratio_upper(a: list[float], b: list[float], q: float, *, level: float = 0.95, reps: int = 1000,
                seed: int = 0) -> float:
    """Upper `level` bound of quantile(a, q) / quantile(b, q) by the percentile bootstrap; inf when
    either sample is empty (a target that cannot be computed fails)."""
    if not a or not b:
        return math.inf
    rng = random.Random(seed)
    ratios = []
    for _ in range(reps):
        ra = quantile(rng.choices(a, k=len(a)), q)
        rb = quantile(rng.choices(b, k=len(b)), q)
        ratios.append(ra / rb if rb > 0 else math.inf)
    return quantile(ratios, level)


def _t_margin(values: list[float]) -> float:
    df = len(values) - 1
    t = _T95[max(k for k in _T95 if k <= df)]  # the next smaller tabled df: a wider bound
    return t * statistics.stdev(values) / math.sqrt(len(values))


def mean_lower(values: list[float]) -> float:
    """One-sided 95% lower bound of the mean of `values` (-inf with fewer than 2)."""
    if len(values) < 2:
        return -math.inf
    return statistics.fmean(values) - _t_margin(values)


def mean_upper(values: list[float]) -> float:
    """One-sided 95% upper bound of the mean of `values` (inf with fewer than 2)."""
    if len(values) < 2:
        return math.inf
    return statistics.fmean(values) + _t_margin(values)

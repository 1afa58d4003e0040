"""The plan-load benchmark's verdicts and the bounds it judges by, on hand-built figures (no runs)."""

from __future__ import annotations

import argparse
import math
import random

from benchmarks.bounds import mean_lower, ratio_upper
from benchmarks.serve_plans import report


def _measurement(base: list[float], during: list[float], ended: int = 4, errors: int = 0) -> dict:
    finals = {f"plan-{i}": {"status": "succeeded", "llm_calls": 3, "cost_usd": 0.01, "validated": True}
              for i in range(ended)}
    return {"base": base, "during": during, "finals": finals, "seconds": 10.0, "server_errors": errors,
            "probe_errors": 0, "polls": 8}


ARGS = argparse.Namespace(jobs=4, deadline_s=60.0)


def test_a_p99_within_twice_its_baseline_passes_and_a_tail_past_it_fails():
    rng = random.Random(1)
    base = [1.0 + rng.random() for _ in range(2000)]
    figures, missed = report(ARGS, _measurement(base, [x * 1.1 for x in base]), {})
    assert missed == [] and figures["jobs_per_s"] == 0.4 and figures["llm_calls"] == 12
    assert figures["polls_per_s"] == 0.8
    _, missed = report(ARGS, _measurement(base, [x * 3.0 for x in base]), {})
    assert missed == ["decide p99 during plans <= 2x without (95% upper bound)"]


def test_a_stuck_job_a_5xx_or_an_empty_probe_fails():
    base = [1.0] * 100
    assert report(ARGS, _measurement(base, base, ended=3), {})[1] == ["all 4 jobs end within 60 s"]
    assert report(ARGS, _measurement(base, base, errors=1), {})[1] == ["no 5xx and no failed probe"]
    _, missed = report(ARGS, _measurement(base, []), {})  # a target that cannot be computed fails
    assert "decide p99 during plans <= 2x without (95% upper bound)" in missed


def test_bounds_are_conservative():
    same = [1.0, 2.0, 3.0] * 100
    assert ratio_upper(same, same, 0.5) >= 1.0 and ratio_upper([], same, 0.5) == math.inf
    assert mean_lower([1000.0, 1000.0, 1000.0]) == 1000.0
    assert mean_lower([900.0, 1100.0, 1000.0]) < 1000.0 and mean_lower([5.0]) == -math.inf

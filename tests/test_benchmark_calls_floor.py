"""benchmarks/calls_floor.py's paired ratio and its lower bound, on hand-built episode counts."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
from test_benchmark_exit_codes import BENCH, _load

from rollout.core.trajectory import EpisodeRecord, is_infra_failure, outcome_pairs
from train.targets import Z_ONE_SIDED_95


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
    assert ratio - lower == pytest.approx(Z_ONE_SIDED_95 * sd / mb / math.sqrt(n))


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / "calls_floor.py"), *args], capture_output=True, text=True,
                          timeout=120)


def test_a_missing_world_file_is_one_line_and_generates_nothing(tmp_path: Path) -> None:
    done = _run("--out", str(tmp_path), "--llm", f"sim:world={tmp_path / 'nope.yaml'}")
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "no such world file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_zero_seeds_is_refused_by_the_argument_parser(tmp_path: Path) -> None:
    done = _run("--out", str(tmp_path), "--seeds", "0")
    assert done.returncode == 2
    assert "want a whole number >= 1, got '0'" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_one_pair_has_no_bound() -> None:
    ratio, lower = _load("calls_floor").paired_ratio([3.0], [6.0])
    assert ratio == pytest.approx(0.5) and lower == -math.inf


def _record(*, infra: str = "", error: str = "") -> EpisodeRecord:
    record = EpisodeRecord("e", "r", "t", "f", "d", "p", "1", "sim", True, True, total_llm_calls=6, error=error)
    record.infra_error = infra
    return record


def test_a_pair_with_an_infrastructure_failure_or_a_broken_episode_is_left_out_whole() -> None:
    ok, down, broken = _record(), _record(infra="solver_unavailable: popf cannot start"), _record(error="boom")
    a = [ok, down, ok, ok]
    b = [ok, ok, broken, ok]
    assert outcome_pairs(a, b) == [(ok, ok), (ok, ok)]
    assert not is_infra_failure(ok) and is_infra_failure(down)


def test_dropped_pairs_are_printed_and_counted() -> None:
    bench = _load("calls_floor")
    row = {"episodes": 10, "oracle_success": 0.5, "iterations": 3.0, "llm_calls": 6.0, "decision_calls": 2.0,
           "agent_calls": 3.0}
    by_family = {"planbench": {"weaker teacher": row, "hidden-fault chooser": row,
                               "ratio": {"llm_calls": 1.0, "lower": 0.9, "dropped": 2.0}},
                 "classical": {"weaker teacher": row, "hidden-fault chooser": row,
                               "ratio": {"llm_calls": 1.0, "lower": 0.9, "dropped": 0.0}}}
    assert bench.dropped_pairs(by_family) == {"planbench": 2}
    assert "pairs dropped (an infrastructure failure or a broken episode, not an outcome): planbench 2;" in \
        bench.format_rows(by_family)
    by_family["planbench"]["ratio"]["dropped"] = 0.0
    assert bench.dropped_pairs(by_family) == {}
    assert "pairs dropped" not in bench.format_rows(by_family)

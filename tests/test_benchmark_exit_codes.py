"""Each benchmark's exit code follows the targets it prints: hand-built figures, no long runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    finally:
        sys.path[:] = path
    return module


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


GOOD_JOBS = {"scaling": 1.9, "overhead": 1.05, "peak_rss_mb": 300.0}


@pytest.mark.parametrize("jobs, store, code", [
    (GOOD_JOBS, {"delta_rows_per_s": 25_000.0}, 0),
    ({**GOOD_JOBS, "scaling": 1.2}, {"delta_rows_per_s": 25_000.0}, 1),  # one target printed NOT met
    ({**GOOD_JOBS, "peak_rss_mb": 500.0}, {"delta_rows_per_s": 25_000.0}, 1),  # < 500 MB is strict
    ({**GOOD_JOBS, "overhead": float("nan")}, {"delta_rows_per_s": 25_000.0}, 1),
    (None, {"delta_rows_per_s": 19_999.0}, 1),  # --store-only
    (None, {}, 1),  # a figure that is missing fails
])
def test_rollout_benchmark_exit_code(jobs, store, code, capsys: pytest.CaptureFixture[str]) -> None:
    rollout = _load("rollout")
    figures = {"store": store} if jobs is None else {"jobs": jobs, "store": store}
    assert rollout.finish(figures, as_json=True) == code
    data = _last_json(capsys.readouterr().out)
    assert data["passed"] is (code == 0) and len(data["targets"]) == (1 if jobs is None else 4)


def test_solvers_benchmark_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    solvers_bench = _load("solvers")
    good = {"speedup": 6.0, "overhead": 1.02, "scaling": 1.9, "costs_identical": 1, "one_shot_ratio": 1.1}
    assert solvers_bench.finish(good, one_shot=True, as_json=True) == 0
    assert _last_json(capsys.readouterr().out)["figures"]["speedup"] == 6.0
    assert solvers_bench.finish({**good, "scaling": 1.3}, one_shot=True, as_json=False) == 1
    assert "missed: 3. throughput" in capsys.readouterr().out
    assert solvers_bench.finish({**good, "costs_identical": 0}, one_shot=False, as_json=False) == 1
    assert solvers_bench.finish({**good, "one_shot_ratio": None}, one_shot=True, as_json=False) == 1
    assert solvers_bench.finish({**good, "one_shot_ratio": None}, one_shot=False, as_json=False) == 0


def test_parity_fails_on_a_worse_or_unmeasured_figure(capsys: pytest.CaptureFixture[str]) -> None:
    parity = _load("parity")
    same = {name: [10.0] for name in parity.ROLLOUT_PATTERNS}
    failed, figures = parity.verdicts({"base": same, "head": dict(same)}, skip_serve=True)
    assert failed == [] and figures["rollout 1 worker, episodes/s"]["ratio"] == 1.0
    slower = {**same, "rollout 1 worker, episodes/s": [8.0]}  # higher is better: 0.8x is worse than noise
    failed, _ = parity.verdicts({"base": same, "head": slower}, skip_serve=True)
    assert failed == ["rollout 1 worker, episodes/s"]
    failed, _ = parity.verdicts({"base": same, "head": dict(same)}, skip_serve=False)
    assert failed and all("not measured" in f for f in failed)


def test_pipeline_benchmark_exit_code() -> None:
    pipeline = _load("halo_pipeline")
    assert pipeline.exit_code([("a", True, "")]) == 0
    assert pipeline.exit_code([("a", True, ""), ("b", False, "")]) == 1
    assert pipeline.exit_code([]) == 1

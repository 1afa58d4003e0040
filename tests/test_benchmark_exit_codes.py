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
    sys.modules[spec.name] = module  # type: ignore[union-attr]  (its dataclasses look themselves up there)
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


def _world(name: str, calls_ok: bool, success_ok: bool) -> dict:
    pipeline = _load("halo_pipeline")
    names = pipeline.FAMILY_TARGETS
    return {"world": name, "hash": "0" * 16, "fast oracle": 0.8, "teacher oracle": 0.76, "paired difference": 4.0,
            "paired se": 2.0, "episodes": 234, "calls ratio": 0.44,
            "targets": {names[0]: success_ok, names[1]: calls_ok}, "all pipeline targets": {}}


def test_family_shares_follow_the_worlds() -> None:
    pipeline = _load("halo_pipeline")
    rows = [_world(f"w{i}", True, i != 3) for i in range(10)]
    shares = pipeline.family_shares(rows)
    success, calls = (shares[n] for n in pipeline.FAMILY_TARGETS)
    assert success["held"] == 9 and success["passed"] and calls["held"] == 10
    assert 0.5 < success["low"] < 0.9 < success["high"] <= 1.0
    assert pipeline.exit_code([(n, s["passed"], "") for n, s in shares.items()]) == 0
    rows = [_world(f"w{i}", i < 7, True) for i in range(10)]  # 7 of 10 worlds: below 8 of 10
    shares = pipeline.family_shares(rows)
    assert not shares[pipeline.FAMILY_TARGETS[1]]["passed"]
    assert pipeline.exit_code([(n, s["passed"], "") for n, s in shares.items()]) == 1
    assert not any(s["passed"] for s in pipeline.family_shares([]).values())
    table = pipeline.format_family(rows)
    assert table.count("\n") == 11 and "| NO |" in table


def test_gate_benchmark_targets() -> None:
    gate = _load("gate")
    from train.targets import all_passed, judge

    def fig(promoted: int, difference: float) -> dict:
        return {"promoted_share": promoted / 40, "difference": difference, "se": 1.0, "episodes": 624}

    good = {"equal": fig(1, 0.3), "worse": fig(0, -5.0), "better": fig(35, 8.0)}
    assert all_passed(judge(gate.targets(good), good))
    for label, bad in (("equal", fig(3, 0.0)), ("worse", fig(3, -5.0)), ("better", fig(31, 8.0)),
                       ("better", fig(40, 5.5)), ("worse", fig(0, -2.5))):
        assert not all_passed(judge(gate.targets({**good, label: bad}), {**good, label: bad})), (label, bad)

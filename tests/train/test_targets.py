"""Targets on hand-built result tables: a missing row, NaN, zero denominator or too few episodes
fails; a margin is judged by its one-sided 95% bound (tie, just above, just below)."""

from __future__ import annotations

import json
import math

import pytest

from train.pipeline import (
    ABLATION_PAIRED_KEY,
    FAST_PAIRED_KEY,
    PAIRED_KEY,
    XD_PAIRED,
    PipelineResult,
    Row,
    check_targets,
)
from train.targets import (
    AtLeast,
    AtMost,
    DifferenceBound,
    RatioAtMost,
    Verdict,
    judge,
    print_verdicts,
)

Z = 1.6448536269514722


def _one(target, table) -> Verdict:
    (verdict,) = judge([target], table)
    return verdict


@pytest.mark.parametrize("table, reason", [
    ({}, "row 'fast' missing"),
    ({"fast": {}}, "fast.speedup missing"),
    ({"fast": {"speedup": None}}, "fast.speedup missing"),
    ({"fast": {"speedup": float("nan")}}, "fast.speedup is nan"),
    ({"fast": {"speedup": "quick"}}, "not a number"),
])
def test_a_figure_that_cannot_be_read_fails(table, reason) -> None:
    verdict = _one(AtLeast("speed-up", "fast", "speedup", 5.0), table)
    assert not verdict.passed and reason in verdict.figures and "cannot be judged" in verdict.figures


@pytest.mark.parametrize("value, passed", [(5.0, True), (5.0001, True), (4.9999, False)])
def test_threshold_tie_just_above_just_below(value: float, passed: bool) -> None:
    assert _one(AtLeast("x", "r", "v", 5.0), {"r": {"v": value}}).passed is passed
    assert _one(AtMost("x", "r", "v", 5.0), {"r": {"v": value}}).passed is (value <= 5.0)


def test_ratio_with_a_zero_or_missing_denominator_fails() -> None:
    target = RatioAtMost("calls", "fast", "teacher", "calls", 0.55)
    assert not _one(target, {"fast": {"calls": 0.0}, "teacher": {"calls": 0.0}}).passed
    assert "no denominator" in _one(target, {"fast": {"calls": 1.0}, "teacher": {"calls": 0.0}}).figures
    assert "row 'teacher' missing" in _one(target, {"fast": {"calls": 1.0}}).figures
    assert _one(target, {"fast": {"calls": 5.5}, "teacher": {"calls": 10.0}}).passed  # tie
    assert not _one(target, {"fast": {"calls": 5.51}, "teacher": {"calls": 10.0}}).passed


def test_too_few_episodes_fails_even_with_good_figures() -> None:
    target = RatioAtMost("calls", "fast", "teacher", "calls", 0.55, min_episodes=20)
    table = {"fast": {"calls": 1.0, "episodes": 19}, "teacher": {"calls": 10.0, "episodes": 200}}
    verdict = _one(target, table)
    assert not verdict.passed and "19 episodes" in verdict.figures


def _diff(difference: float, se: float, episodes: int = 200) -> dict:
    return {"diff": {"difference": difference, "se": se, "episodes": episodes}}


@pytest.mark.parametrize("difference, passed", [
    (Z * 2.0, True),  # tie: the lower bound is exactly 0
    (Z * 2.0 + 0.01, True),  # just above
    (Z * 2.0 - 0.01, False),  # just below: the point estimate is +3.3 points, still not enough
])
def test_better_than_is_judged_by_the_lower_bound_not_the_point(difference: float, passed: bool) -> None:
    assert _one(DifferenceBound("better", "diff", 0.0), _diff(difference, 2.0)).passed is passed


def test_clearly_below_uses_the_upper_bound() -> None:
    target = DifferenceBound("below", "diff", -5.0, direction="below")
    assert _one(target, _diff(-5.0 - Z * 1.0, 1.0)).passed
    assert not _one(target, _diff(-5.0 - Z * 1.0 + 0.01, 1.0)).passed
    assert not _one(target, _diff(-30.0, float("nan"))).passed
    assert not _one(target, _diff(-30.0, 1.0, episodes=10)).passed


def test_no_targets_is_not_a_pass(capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = judge([], {})
    assert len(verdicts) == 1 and not verdicts[0].passed
    assert print_verdicts(verdicts) == 1
    assert "missed: at least one target" in capsys.readouterr().out


def test_print_verdicts_exit_code_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    ok = judge([AtLeast("a", "r", "v", 1.0)], {"r": {"v": 2.0}})
    assert print_verdicts(ok, figures={"v": 2.0}, as_json=True) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "all targets met"
    data = json.loads(out[-1])
    assert data["passed"] is True and data["figures"] == {"v": 2.0} and data["targets"][0]["name"] == "a"
    bad = judge([AtLeast("a", "r", "v", 1.0), AtLeast("b", "r", "w", 1.0)], {"r": {"v": 2.0}})
    assert print_verdicts(bad) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "missed: b"


# ---------------------------------------------------------------- the pipeline's targets

SIM = "simulated (llm_backend=sim)"


def _row(policy: str, oracle: float, calls: float, cost: float, episodes: int = 234, family: str = "all") -> Row:
    return Row(family, policy, SIM, episodes, oracle, 0.02, oracle, 5.0, calls, 0.0, cost, cost, 0.5, 1.0)


def _paired(difference: float, se: float, episodes: int = 234) -> dict:
    return {"episodes": float(episodes), "difference": difference, "se": se}


def _result(**changes) -> PipelineResult:
    rows = [_row("fast policy", 0.82, 4.88, 1.6e-5), _row("prompted teacher", 0.76, 11.13, 0.0162),
            _row("rules+random", 0.49, 5.57, 2e-7), _row("majority class", 0.29, 7.47, 4e-8)]
    stages = {PAIRED_KEY: {"fast policy": _paired(6.0, 2.8), "rules+random": _paired(-27.4, 3.0),
                           "majority class": _paired(-47.4, 3.2)},
              FAST_PAIRED_KEY: {"rules+random": _paired(-33.3, 3.0), "majority class": _paired(-53.4, 3.0)},
              ABLATION_PAIRED_KEY: {"unfiltered": _paired(4.7, 1.9)}}
    cross = [{"family": "planbench", "in-distribution oracle": 0.90, "in-distribution episodes": 500,
              "held-out-domain oracle": 0.90, "held-out-domain episodes": 500, XD_PAIRED: _paired(0.5, 1.5, 300)}]
    config = {"llm_policy": False, "ablations": True, "cross_domain": True,
              "holdout_domains": ("planbench/mystery_blocksworld",)}
    result = PipelineResult(config=config, stages=stages, comparison=rows, cross_domain=cross)
    for key, value in changes.items():
        setattr(result, key, value)
    return result


def test_pipeline_targets_pass_on_clear_figures() -> None:
    verdicts = check_targets(_result())
    assert len(verdicts) == 9 and all(ok for _, ok, _ in verdicts), verdicts


def test_a_renamed_policy_label_fails_instead_of_judging_nothing() -> None:
    result = _result()
    result.comparison = [r if r.policy != "fast policy" else _row("fast policy v2", 0.82, 4.88, 1.6e-5)
                         for r in result.comparison]
    failed = [name for name, ok, figures in check_targets(result) if not ok and "missing" in figures]
    assert any("LLM calls" in f for f in failed) and any("cost" in f for f in failed)


def test_missing_costs_are_not_coerced_into_a_pass() -> None:
    result = _result()
    result.comparison = [r if r.policy != "prompted teacher" else _row("prompted teacher", 0.76, 11.13, 0.0)
                         for r in result.comparison]
    verdicts = {name: (ok, figures) for name, ok, figures in check_targets(result)}
    ok, figures = verdicts["fast policy: orchestration cost/task <= 1/45 the prompted teacher's"]
    assert not ok and "no denominator" in figures


def test_filter_margin_inside_its_standard_error_fails() -> None:
    result = _result()
    result.stages[ABLATION_PAIRED_KEY] = {"unfiltered": _paired(2.0, 1.9)}  # +2.0 points, bound -1.1
    verdicts = {name: ok for name, ok, _ in check_targets(result)}
    assert verdicts["verifier filter: validator-filtered above unfiltered (lower 95% bound of the paired "
                    "difference > 0)"] is False


def test_a_tie_is_not_better() -> None:
    """Filtered and unfiltered models that ran identically (a difference of 0, SE 0) are not "above"."""
    result = _result()
    result.stages[ABLATION_PAIRED_KEY] = {"unfiltered": _paired(0.0, 0.0)}
    verdicts = {name: (ok, figures) for name, ok, figures in check_targets(result)}
    ok, figures = verdicts["verifier filter: validator-filtered above unfiltered (lower 95% bound of the paired "
                           "difference > 0)"]
    assert not ok and "target > +0" in figures
    strict = DifferenceBound("better", "diff", 0.0, strict=True)
    assert not _one(strict, _diff(0.0, 0.0)).passed and _one(strict, _diff(0.01, 0.0)).passed


def test_too_few_held_out_episodes_fail_the_comparison() -> None:
    result = _result()
    result.stages[PAIRED_KEY]["fast policy"] = _paired(6.0, 2.8, episodes=12)
    failed = [figures for name, ok, figures in check_targets(result) if not ok]
    assert any("12 episodes" in f for f in failed)


def test_cross_domain_gap_is_judged_by_its_upper_bound() -> None:
    """The verdict reads the paired figure (the policy trained with the held-out domains minus the one
    trained without them, on those domains' held-out tasks), not the in-vs-out gap, which measures how
    hard the held-out domains are: here the unpaired gap is +30 points and the paired one -1 point."""
    name = "cross-domain planbench: held-out domains within 5 points of the policy trained with them (upper 95% " \
           "bound, paired)"
    row = {"family": "planbench", "in-distribution oracle": 0.90, "in-distribution episodes": 142,
           "held-out-domain oracle": 0.60, "held-out-domain episodes": 200}

    def verdict(paired: dict) -> tuple[bool, str]:
        return {n: (ok, f) for n, ok, f in check_targets(_result(cross_domain=[{**row, XD_PAIRED: paired}]))}[name]

    ok, figures = verdict(_paired(-1.0, 2.0, 90))
    assert ok and "upper 95% bound +2.29" in figures
    # a paired gap of +1 point whose SE is 2.5 cannot claim "within 5 points" (upper bound +5.1)
    ok, figures = verdict(_paired(1.0, 2.5, 90))
    assert not ok and "upper 95% bound +5.11" in figures


def test_a_cross_domain_family_without_a_row_fails() -> None:
    result = _result(cross_domain=[])
    failed = [figures for name, ok, figures in check_targets(result) if not ok]
    assert failed == ["cannot be judged: row 'cross-domain/planbench' missing"]


def test_mean_se_is_the_sample_standard_error_and_nan_when_it_cannot_be_given() -> None:
    from train.targets import mean_se

    mean, se = mean_se([1.0, 0.0, 1.0, 0.0])
    assert mean == 0.5 and math.isclose(se, math.sqrt((4 * 0.25) / 3 / 4))
    assert math.isnan(mean_se([])[0]) and math.isnan(mean_se([])[1])
    one = mean_se([0.7])
    assert one[0] == 0.7 and math.isnan(one[1])

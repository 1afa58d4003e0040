"""Targets that cannot pass vacuously: typed checks on named rows of a result table.

A result table maps a row name to its statistics (`{"fast policy": {"oracle": 0.91, "episodes":
234}, ...}`). Each target names the rows and the statistic it reads; a missing row or statistic,
a NaN, a zero denominator or too few episodes makes it FAIL with the reason, never pass or skip.
A margin between two policies is judged on the paired difference by its one-sided 95% bound
(difference - 1.645 x paired SE must clear the margin), not on the point estimate.

    verdicts = judge([AtLeast("speed-up", "solver", "speedup", 5.0)], {"solver": {"speedup": 6.1}})
    code = print_verdicts(verdicts)          # 0 when every target held, 1 otherwise
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from solvers.errors import InputError

Value = float | int | str | None
Table = Mapping[str, Mapping[str, Value]]

Z_ONE_SIDED_95 = 1.6448536269514722


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """The mean and its standard error (sample SD / sqrt(n)); NaN where n is too small for one
    (no values: both NaN; one value: the SE)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = math.fsum(values) / n
    if n < 2:
        return mean, math.nan
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1) / n)


def paired_ratio(base: Sequence[float], other: Sequence[float]) -> tuple[float, float, float, float]:
    """(mean of base, mean of other, their ratio other/base, the ratio's upper one-sided 95% bound
    by the delta method) over paired samples; the ratio and bound are NaN when base's mean is 0."""
    if not base:
        return math.nan, math.nan, math.nan, math.nan
    mean_b, mean_o = math.fsum(base) / len(base), math.fsum(other) / len(other)
    if not mean_b:
        return mean_b, mean_o, math.nan, math.nan
    ratio = mean_o / mean_b
    _, se_lin = mean_se([o - ratio * b for b, o in zip(base, other, strict=True)])
    return mean_b, mean_o, ratio, ratio + Z_ONE_SIDED_95 * se_lin / mean_b


class TargetError(InputError, ValueError):
    """A statistic a target needs cannot be read (missing, not a number, NaN)."""


@dataclass(frozen=True)
class Verdict:
    name: str
    passed: bool
    figures: str  # what it was judged on, or why it could not be judged

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def number(table: Table, row: str, stat: str) -> float:
    """table[row][stat] as a finite float, or a TargetError that names what is missing."""
    if row not in table:
        raise TargetError(f"row {row!r} missing")
    value = table[row].get(stat)
    if value is None:
        raise TargetError(f"{row}.{stat} missing")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TargetError(f"{row}.{stat} is not a number ({value!r})") from None
    if math.isnan(out) or math.isinf(out):
        raise TargetError(f"{row}.{stat} is {out}")
    return out


def _enough(table: Table, row: str, min_episodes: int) -> None:
    if min_episodes <= 0:
        return
    n = number(table, row, "episodes")
    if n < min_episodes:
        raise TargetError(f"{row} has {n:.0f} episodes, fewer than the {min_episodes} a verdict needs")


@dataclass(frozen=True)
class AtLeast:
    """row.stat >= bound (a measured figure without a spread, e.g. a speed ratio)."""

    name: str
    row: str
    stat: str
    bound: float
    min_episodes: int = 0

    def check(self, table: Table) -> Verdict:
        _enough(table, self.row, self.min_episodes)
        value = number(table, self.row, self.stat)
        return Verdict(self.name, value >= self.bound, f"{value:.4g} (target >= {self.bound:g})")


@dataclass(frozen=True)
class AtMost:
    """row.stat <= bound (strict: < bound)."""

    name: str
    row: str
    stat: str
    bound: float
    min_episodes: int = 0
    strict: bool = False

    def check(self, table: Table) -> Verdict:
        _enough(table, self.row, self.min_episodes)
        value = number(table, self.row, self.stat)
        ok = value < self.bound if self.strict else value <= self.bound
        return Verdict(self.name, ok, f"{value:.4g} (target {'<' if self.strict else '<='} {self.bound:g})")


@dataclass(frozen=True)
class RatioAtMost:
    """row.stat / ref_row.stat <= bound; a zero or negative denominator fails."""

    name: str
    row: str
    ref_row: str
    stat: str
    bound: float
    min_episodes: int = 0

    def check(self, table: Table) -> Verdict:
        for r in (self.row, self.ref_row):
            _enough(table, r, self.min_episodes)
        num, den = number(table, self.row, self.stat), number(table, self.ref_row, self.stat)
        if den <= 0:
            raise TargetError(f"{self.ref_row}.{self.stat} is {den:g}: the ratio has no denominator")
        ratio = num / den
        return Verdict(self.name, ratio <= self.bound,
                       f"{num:.4g} / {den:.4g} = {ratio:.4g} (target <= {self.bound:g})")


@dataclass(frozen=True)
class DifferenceBound:
    """A difference row ({"difference", "se", "episodes"}, in points) against a margin: the paired
    SE where both sides ran the same episodes, the two-sample SE where they could not.

    direction "above": the lower one-sided bound, difference - z x se, must be >= margin
    (not below by more than -margin); "below": the upper bound, difference + z x se, must be
    <= margin (clearly worse by at least -margin). strict: > / < instead, for "better than"
    claims, so a tie (a difference of 0 with no spread) does not pass.
    """

    name: str
    row: str
    margin: float
    direction: str = "above"
    min_episodes: int = 30
    z: float = Z_ONE_SIDED_95
    strict: bool = False

    def check(self, table: Table) -> Verdict:
        if self.direction not in ("above", "below"):
            raise TargetError(f"direction {self.direction!r} (want above or below)")
        _enough(table, self.row, self.min_episodes)
        diff, se = number(table, self.row, "difference"), number(table, self.row, "se")
        if se < 0:
            raise TargetError(f"{self.row}.se is negative ({se:g})")
        n = number(table, self.row, "episodes")
        if self.direction == "above":
            bound = diff - self.z * se
            ok, rel = (bound > self.margin, ">") if self.strict else (bound >= self.margin, ">=")
        else:
            bound = diff + self.z * se
            ok, rel = (bound < self.margin, "<") if self.strict else (bound <= self.margin, "<=")
        side = "lower" if self.direction == "above" else "upper"
        return Verdict(self.name, ok, f"{diff:+.2f} ± {se:.2f} points over {n:.0f} episodes; "
                                      f"{side} 95% bound {bound:+.2f} (target {rel} {self.margin:+g})")


Target = AtLeast | AtMost | RatioAtMost | DifferenceBound


def judge(targets: Sequence[Target], table: Table) -> list[Verdict]:
    """Every target's verdict; one that cannot be computed fails with the reason."""
    out = []
    for target in targets:
        try:
            out.append(target.check(table))
        except TargetError as exc:
            out.append(Verdict(target.name, False, f"cannot be judged: {exc}"))
    if not targets:
        out.append(Verdict("at least one target", False, "no target was given"))
    return out


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _increasing_root(f, target: float) -> float:  # noqa: ANN001  (f increasing on [0, 1])
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def binomial_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a share k of n; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    a = (1 - confidence) / 2
    low = 0.0 if k == 0 else _increasing_root(lambda p: _binomial_tail(k, n, p), a)
    high = 1.0 if k == n else _increasing_root(lambda p: _binomial_tail(k + 1, n, p), 1 - a)
    return low, high


def all_passed(verdicts: Sequence[Verdict]) -> bool:
    return bool(verdicts) and all(v.passed for v in verdicts)


def format_verdicts(verdicts: Sequence[Verdict]) -> list[str]:
    lines = [f"- {'PASS' if v.passed else 'FAIL'}: {v.name} ({v.figures})" for v in verdicts]
    failed = [v.name for v in verdicts if not v.passed]
    lines.append("all targets met" if verdicts and not failed else "missed: " + "; ".join(failed or ["no target"]))
    return lines


def print_verdicts(verdicts: Sequence[Verdict], *, figures: Mapping[str, object] | None = None,
                   as_json: bool = False) -> int:
    """Print the verdicts (and with as_json the figures and verdicts as one JSON line); the exit code."""
    for line in format_verdicts(verdicts):
        print(line)
    if as_json:
        print(json.dumps({"figures": figures or {}, "targets": [v.to_dict() for v in verdicts],
                          "passed": all_passed(verdicts)}, default=str))
    return 0 if all_passed(verdicts) else 1


__all__ = ["AtLeast", "AtMost", "DifferenceBound", "RatioAtMost", "Table", "Target", "TargetError", "Verdict",
           "all_passed", "binomial_interval", "format_verdicts", "judge", "number", "print_verdicts"]

"""Anytime-valid one-sided bounds for the mean of paired differences in [-1, 1] (testing by betting).

For every candidate mean m on a grid, a gambler bets against "the mean is m": after each paired
difference x its wealth is multiplied by 1 + lam * (x - m) (lower bound: betting the mean is
above m) or 1 + lam * (m - x) (upper bound), lam chosen from the differences seen before (never
from x itself). Under "mean <= m" (resp. ">= m") that wealth is a nonnegative supermartingale,
so by Ville's inequality it ever reaches 1/alpha with probability at most alpha, however often
one looks. The bound is the edge of the m not yet rejected: a (1 - alpha) confidence sequence.
This is the SPRT's likelihood-ratio martingale generalised to bounded outcomes without a model
of their distribution (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by
betting", JRSS-B 2024); a test with it looks after every batch of episodes at no cost in error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

GRID = np.linspace(-1.0, 1.0, 801)  # candidate means, 0.25 points apart
MAX_BET = 0.5  # lam * (largest possible loss) <= 0.5: no single observation can halve the wealth


@dataclass
class BettingBound:
    """A one-sided (1 - alpha) confidence sequence for the mean of values in [-1, 1]."""

    side: str  # "lower" | "upper"
    alpha: float
    log_wealth: np.ndarray = field(default_factory=lambda: np.zeros_like(GRID))
    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    best: float = field(init=False)

    def __post_init__(self) -> None:
        if self.side not in ("lower", "upper"):
            raise ValueError(f"side {self.side!r} (want lower or upper)")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        self.best = -1.0 if self.side == "lower" else 1.0

    def _bets(self) -> np.ndarray:
        """The stake per grid mean, from the values seen so far (a prior of one observation at 0)."""
        mean = self.total / (self.n + 1)
        var = (0.25 + self.total_sq - 2 * mean * self.total + self.n * mean * mean) / (self.n + 1)
        gap = mean - GRID if self.side == "lower" else GRID - mean
        lam = np.clip(gap / (var + gap * gap), 0.0, None)
        loss = 1.0 + GRID if self.side == "lower" else 1.0 - GRID  # the most one observation can lose per unit
        return np.minimum(lam, MAX_BET / np.maximum(loss, 1e-9))

    def update(self, values: list[float]) -> None:
        for x in values:
            if not -1.0 <= x <= 1.0:
                raise ValueError(f"a paired difference must be in [-1, 1], got {x}")
            step = (x - GRID) if self.side == "lower" else (GRID - x)
            self.log_wealth += np.log1p(self._bets() * step)
            self.n += 1
            self.total += x
            self.total_sq += x * x
        self.best = max(self.best, self._edge()) if self.side == "lower" else min(self.best, self._edge())

    def _edge(self) -> float:
        kept = GRID[self.log_wealth < np.log(1.0 / self.alpha)]
        if kept.size == 0:  # every grid mean rejected: only possible with values outside the grid's span
            return float(GRID[-1] if self.side == "lower" else GRID[0])
        return float(kept.min() if self.side == "lower" else kept.max())

    @property
    def bound(self) -> float:
        """The running bound (the intersection over time, itself valid at every time)."""
        return self.best

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else float("nan")


__all__ = ["GRID", "BettingBound"]

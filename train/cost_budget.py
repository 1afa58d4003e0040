"""A time budget for reading one state: the features' expensive parts (PDDL parsing, relaxed
reachability, matching goal atoms against the task's words) check it and fall back to a neutral
feature ("unknown") instead of running on.

The budget is a context variable, so each thread (and each asyncio task) has its own; outside any
`time_budget` block nothing is ever over budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from solvers.errors import HaloError

# The perf_counter() time past which feature work falls back (inf: no budget). Callers in other
# layers may set it directly (ContextVar.set) to keep their hot path free of calls into this one.
DEADLINE: ContextVar[float] = ContextVar("halo_feature_deadline", default=math.inf)


class OverBudget(HaloError):
    """Raised inside a feature computation past its deadline; caught where a fallback exists."""


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    token = DEADLINE.set(min(DEADLINE.get(), time.perf_counter() + seconds))
    try:
        yield
    finally:
        DEADLINE.reset(token)


def over_budget() -> bool:
    deadline = DEADLINE.get()
    return deadline != math.inf and time.perf_counter() > deadline


def check_budget() -> None:
    if over_budget():
        raise OverBudget

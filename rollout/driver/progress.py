"""Live progress of a rollout job: counts, rate, success so far, ETA, errors by category."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text


@dataclass
class ProgressStats:
    total: int
    resumed: int = 0  # already committed when the job started
    done: int = 0  # finished in this session (handed to the committer)
    succeeded: int = 0  # validator-accepted among `done`
    oracle_ok: int = 0
    oracle_graded: int = 0
    committed: int = 0
    in_flight: int = 0
    workers: int = 0
    window: int = 0  # sum of the workers' AIMD windows
    max_in_flight: int = 0
    # From the workers' status counters (rollout/llm/budget.py GateStats), summed over workers:
    llm_in_flight: int = 0
    llm_waiting: int = 0  # LLM calls waiting for the job's budget
    llm_rpm: float = 0.0  # requests and tokens per minute over the last minute
    llm_tpm: float = 0.0
    llm_429: int = 0
    solver_queued: int = 0  # episodes waiting for a solver CPU
    llm_rpm_limit: float | None = None
    llm_tpm_limit: float | None = None
    llm_concurrency_limit: int | None = None
    retries: int = 0
    quarantined_tasks: int = 0
    dropped: int = 0  # episodes of quarantined tasks, given up
    errors: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def rate(self) -> float:
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.resumed - self.done - self.dropped)

    @property
    def eta_s(self) -> float | None:
        return self.remaining / self.rate if self.rate > 0 else None

    def success_text(self) -> str:
        if not self.done:
            return "-"
        text = f"{self.succeeded / self.done:.1%} validator"
        if self.oracle_graded:
            text += f", {self.oracle_ok / self.oracle_graded:.1%} oracle"
        return text


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _against(value: float, limit: float | None) -> str:
    return f"{value:,.0f}" + (f"/{limit:,.0f} ({value / limit:.0%})" if limit else "")


def llm_text(stats: ProgressStats) -> str:
    return (f"{_against(stats.llm_in_flight, stats.llm_concurrency_limit)} calls in flight"
            f" ({stats.llm_waiting} waiting for the budget)"
            f"   {_against(stats.llm_rpm, stats.llm_rpm_limit)} requests/min"
            f"   {_against(stats.llm_tpm, stats.llm_tpm_limit)} tokens/min   {stats.llm_429} x 429")


def render(stats: ProgressStats, title: str) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    finished = stats.resumed + stats.done
    table.add_row("episodes", f"{finished}/{stats.total}" + (f"  ({stats.resumed} resumed)" if stats.resumed else ""))
    table.add_row("rate", f"{stats.rate:.1f} episodes/s   elapsed {_fmt_s(stats.elapsed)}   ETA {_fmt_s(stats.eta_s)}")
    table.add_row("success so far", stats.success_text())
    table.add_row("committed", f"{stats.committed} new   in flight {stats.in_flight} "
                               f"(window {stats.window} over {stats.workers} workers)")
    table.add_row("LLM", llm_text(stats))
    table.add_row("solver CPUs", f"{stats.solver_queued} episodes waiting for a solver CPU")
    errors = ", ".join(f"{k} {v}" for k, v in stats.errors.most_common(6)) or "none"
    table.add_row("errors", errors)
    if stats.quarantined_tasks or stats.retries:
        table.add_row("faults", f"{stats.retries} retried, {stats.quarantined_tasks} tasks quarantined "
                                f"({stats.dropped} episodes dropped)")
    table.title = Text(title, style="bold cyan")
    table.title_justify = "left"
    return table


class ProgressDisplay:
    """A rich live panel on a terminal; a plain line every `log_every_s` otherwise (logs, CI)."""

    def __init__(self, stats: ProgressStats, title: str, *, console: Console | None = None, enabled: bool = True,
                 log_every_s: float = 10.0) -> None:
        self.stats = stats
        self.title = title
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.log_every_s = log_every_s
        self._live: Live | None = None
        self._last_log = 0.0

    def __enter__(self) -> ProgressDisplay:
        if self.enabled and self.console.is_terminal:
            self._live = Live(render(self.stats, self.title), console=self.console, refresh_per_second=4,
                              transient=False)
            self._live.__enter__()
        return self

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(Group(render(self.stats, self.title)))
        elif self.enabled and time.monotonic() - self._last_log >= self.log_every_s:
            self._last_log = time.monotonic()
            s = self.stats
            self.console.print(f"[{self.title}] {s.resumed + s.done}/{s.total} episodes, {s.rate:.1f}/s, "
                               f"success {s.success_text()}, ETA {_fmt_s(s.eta_s)}, in flight {s.in_flight}, "
                               f"LLM {llm_text(s)}, {s.solver_queued} waiting for a solver CPU, "
                               f"errors {dict(s.errors) or 'none'}", highlight=False)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(Group(render(self.stats, self.title)))
            self._live.__exit__(None, None, None)
            self._live = None

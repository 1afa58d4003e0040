"""`halo loop status`: the loop's history from its event log, as a table and a PNG plot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cluster.loop.events import Event, EventLog


@dataclass
class CycleRow:
    cycle: int
    state: str  # done | in progress (<step>)
    new: int | None = None
    old: int | None = None
    table_version: int | None = None
    candidate: str = ""
    trained: str = ""  # trained | adopted
    val_accuracy: float | None = None
    cand_oracle: float | None = None
    serv_oracle: float | None = None
    cand_calls: float | None = None
    serv_calls: float | None = None
    decision: str = ""
    serving: str = ""
    diff: float | None = None  # oracle success, candidate - serving, over the gate's paired episodes
    low: float | None = None  # the gate's (1 - alpha) interval of that difference at its decision
    high: float | None = None
    pairs: int | None = None


def history(events: list[Event]) -> tuple[dict, list[CycleRow]]:
    init = next((e.data for e in events if e.key == "init"), {})
    rows: dict[int, CycleRow] = {}
    for e in events:
        if e.cycle == 0:
            continue
        row = rows.setdefault(e.cycle, CycleRow(e.cycle, state=f"in progress ({e.step})"))
        d = e.data
        if e.step == "collect":
            row.new, row.old, row.table_version = d["n_new"], d["n_old"], d["table_version"]
        elif e.step == "train":
            row.candidate, row.trained = d["version"], "adopted" if d.get("adopted") else "trained"
            row.val_accuracy = d["metrics"].get("val_accuracy")
        elif e.step == "gate" and d.get("candidate") and d.get("serving"):
            row.cand_oracle, row.serv_oracle = d["candidate"]["oracle_success"], d["serving"]["oracle_success"]
            row.cand_calls = d["candidate"]["llm_calls_per_episode"]
            row.serv_calls = d["serving"]["llm_calls_per_episode"]
            row.decision = d["decision"]
            seq = d.get("sequential") or {}  # absent in logs written before the sequential gate
            if seq.get("pairs"):
                row.diff, row.low, row.high, row.pairs = (seq["success_diff"], seq["success_low"],
                                                          seq["success_high"], seq["pairs"])
        elif e.step == "done":
            row.state, row.serving = "done", d["serving"]["version"]
        if e.step != "done" and row.state != "done":
            row.state = f"in progress ({e.step})"
    return init, [rows[c] for c in sorted(rows)]


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _interval(row: CycleRow) -> str:
    if row.diff is None or row.low is None or row.high is None:
        return "-"
    return f"{100 * row.diff:+.1f} [{100 * row.low:+.1f}, {100 * row.high:+.1f}] ({row.pairs})"


def format_table(init: dict, rows: list[CycleRow]) -> str:
    header = ("cycle", "new+old eps", "table v", "candidate", "val acc", "oracle cand/serv",
              "oracle diff [interval] (pairs)", "LLM calls cand/serv", "decision", "serving after", "state")
    lines = [header]
    for r in rows:
        lines.append((str(r.cycle), f"{_f(r.new, 'd')}+{_f(r.old, 'd')}", _f(r.table_version, "d"),
                      f"{r.candidate} ({r.trained})" if r.candidate else "-", _f(r.val_accuracy, ".3f"),
                      f"{_f(r.cand_oracle, '.3f')}/{_f(r.serv_oracle, '.3f')}", _interval(r),
                      f"{_f(r.cand_calls, '.2f')}/{_f(r.serv_calls, '.2f')}", r.decision or "-",
                      r.serving or "-", r.state))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [" | ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    out.insert(1, "-+-".join("-" * w for w in widths))
    start = init.get("serving", {}).get("version", "?")
    return f"initial serving model: {start}; held-out tasks: {len(init.get('holdout_task_ids', []))}\n" + "\n".join(out)


def plot(rows: list[CycleRow], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gated = [r for r in rows if r.cand_oracle is not None]
    fig, (ax1, ax3, ax2) = plt.subplots(3, 1, figsize=(7, 8.5), sharex=True)
    xs = [r.cycle for r in gated]
    ax1.plot(xs, [r.serv_oracle for r in gated], "o-", label="serving model")
    ax1.plot(xs, [r.cand_oracle for r in gated], "s--", label="candidate")
    ax1.set_ylabel("oracle success (held-out)")
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend(loc="lower right")
    tested = [r for r in gated if r.diff is not None]
    ax3.axhline(0.0, color="grey", lw=0.8)
    if tested:
        ys = [100 * r.diff for r in tested]  # type: ignore[operator]
        err = [[y - 100 * r.low for y, r in zip(ys, tested, strict=True)],  # type: ignore[operator]
               [100 * r.high - y for y, r in zip(ys, tested, strict=True)]]  # type: ignore[operator]
        ax3.errorbar([r.cycle for r in tested], ys, yerr=err, fmt="o", capsize=4)
    ax3.set_ylabel("oracle diff, points\n(estimate, interval)")
    ax2.plot(xs, [r.serv_calls for r in gated], "o-", label="serving model")
    ax2.plot(xs, [r.cand_calls for r in gated], "s--", label="candidate")
    ax2.set_ylabel("LLM calls / episode")
    ax2.set_xlabel("cycle (candidate version)")
    ax2.set_xticks(xs, [f"{r.cycle}\n{r.candidate.split('-')[0]}\n{r.decision}" for r in gated])
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def status(log: EventLog, plot_path: Path | None) -> tuple[str, Path | None]:
    init, rows = history(log.events(refresh=True))
    if not init:
        return f"loop {log.prefix}: no events yet", None
    text = format_table(init, rows)
    written = plot(rows, plot_path, log.prefix) if plot_path is not None and rows else None
    return text, written

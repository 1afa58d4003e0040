"""Tables for terminals and scripts: one wide table when it fits, else a stacked layout that
never cuts a value (a title line per row, then `label value` pairs packed into the width)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import typer

WIDE_COLUMNS = 150  # a report table with every column needs about this many without cutting


def console(wide: bool = False):  # noqa: ANN201  (rich Console; imported lazily)
    from rich.console import Console

    c = Console()
    if wide:
        return Console(width=max(c.width, 220))
    # Logs and pipes get the full table, unless COLUMNS says how wide the reader is.
    return c if c.is_terminal or os.environ.get("COLUMNS") else Console(width=160)


def fits(c, needed: int = WIDE_COLUMNS) -> bool:  # noqa: ANN001
    return c.width >= needed


def table_width(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """Columns a rich table needs to show every value whole (headers may wrap at spaces)."""
    widths = [max([len(w) for w in str(h).split()] + [len(str(r[i])) for r in rows] + [1])
              for i, h in enumerate(headers)]
    return sum(widths) + 3 * len(widths) + 1


def stacked(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int, key_columns: int = 1) -> str:
    """Each row: its first `key_columns` values on one line, the rest as `header value` pairs,
    indented and packed into `width` columns."""
    lines: list[str] = []
    for row in rows:
        lines.append("  ".join(str(v) for v in row[:key_columns]))
        current = "   "
        for header, value in zip(headers[key_columns:], row[key_columns:], strict=True):
            pair = f"{header} {value}"
            if len(current) + 2 + len(pair) > width and current.strip():
                lines.append(current.rstrip())
                current = "   "
            current += "  " + pair
        if current.strip():
            lines.append(current.rstrip())
    return "\n".join(lines)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], *, wide: bool = False,
                key_columns: int = 1) -> None:
    """A rich table when the terminal is wide enough (or `wide`), else the stacked layout."""
    from rich.console import Console
    from rich.table import Column, Table

    c = console(wide)
    needed = max(WIDE_COLUMNS, table_width(headers, rows))
    piped = not c.is_terminal and not os.environ.get("COLUMNS")  # logs and scripts: the whole table
    if wide or piped or fits(c, needed):
        if c.width < needed:  # --wide or a pipe: the whole table, however wide
            c = Console(width=needed)
        longest = [max([len(str(r[i])) for r in rows] + [1]) for i in range(len(headers))]
        table = Table(*(Column(str(h), overflow="fold", min_width=n) for h, n in zip(headers, longest, strict=True)),
                      title=title.replace("\n", "  ") or None, title_justify="left")
        for row in rows:
            table.add_row(*row)
        c.print(table)
        return
    if title:
        typer.echo(title)
    typer.echo(stacked(headers, rows, width=max(40, c.width - 1), key_columns=key_columns))

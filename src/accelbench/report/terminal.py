"""Tables for the terminal, drawn with rich."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.table import Table

from accelbench.core.measurement import Measurement
from accelbench.report.table import COLUMNS, rows


def results_table(measurements: Iterable[Measurement], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in ("Result", "% of peak", "CI 95%", "n")
                         else "left", overflow="fold")
    notes: list[str] = []
    for r in rows(measurements):
        style = None if r.ok and not r.doubtful else ("yellow" if r.ok else "red")
        table.add_row(*r.cells(), style=style)
        if r.note:
            notes.append(f"{r.benchmark} {r.params}: {r.note}")
    if notes:
        table.caption = "\n".join(notes)
        table.caption_justify = "left"
    return table


def key_value_table(pairs: Sequence[tuple[str, str]], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in pairs:
        table.add_row(key, value)
    return table


def console(stderr: bool = False) -> Console:
    """A console; output to a file or a pipe gets a wide page rather than 80 columns."""
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal or os.environ.get("COLUMNS") else 160
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)

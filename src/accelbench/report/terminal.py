"""Tables for the terminal, drawn with rich.

Stored text is shown as it is, never interpreted: the console parses no markup and no
emoji codes, and every cell passes through `report.text.printable`, which escapes
control characters. Styles come from rich objects, never from text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from accelbench.core.measurement import Measurement
from accelbench.report.table import COLUMNS, rows
from accelbench.report.text import printable


def text(value: object, style: str = "", *, multiline: bool = False) -> Text:
    """Stored text as a rich Text: shown literally, control characters escaped."""
    return Text(printable(value, multiline=multiline), style=style)


def results_table(measurements: Iterable[Measurement], title: str | None = None) -> Table:
    table = Table(title=text(title) if title else None, title_justify="left",
                  show_lines=False)
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in ("Result", "% of peak", "CI 95%", "n")
                         else "left", overflow="fold")
    notes: list[str] = []
    for r in rows(measurements):
        style = None if r.ok and not r.doubtful else ("yellow" if r.ok else "red")
        table.add_row(*(text(cell) for cell in r.cells()), style=style)
        if r.note:
            notes.append(printable(f"{r.benchmark} {r.params}: {r.note}"))
    if notes:
        table.caption = Text("\n".join(notes))
        table.caption_justify = "left"
    return table


def key_value_table(pairs: Sequence[tuple[str, str]], title: str | None = None) -> Table:
    table = Table(title=text(title) if title else None, title_justify="left",
                  show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in pairs:
        table.add_row(text(key), text(value))
    return table


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich exits 1 when the reader of a pipe went away (`accelbench runs | head -0`);
        # the CLI treats that as every command-line tool does: quietly, exit 0.
        raise BrokenPipeError


def console(stderr: bool = False) -> Console:
    """A console that shows text as it is (no markup, emoji codes or highlighting); output
    to a file or a pipe gets a wide page rather than 80 columns."""
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal or os.environ.get("COLUMNS") else 160
    return _Console(stderr=stderr, markup=False, emoji=False, highlight=False,
                    soft_wrap=False, width=width)

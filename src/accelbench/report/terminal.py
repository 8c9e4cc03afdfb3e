"""Tables for the terminal, drawn with rich.

Stored text is shown as it is, never interpreted: the console parses no markup and no
emoji codes, and every cell passes through `report.text.printable`, which escapes
control characters. Styles come from rich objects, never from text.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from accelbench.report.run_view import Section
from accelbench.report.text import text


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


def print_sections(sections: Sequence[Section], out: Console) -> None:
    """The run view's sections (report.run_view), each under its title, in order."""
    from accelbench.report.tables import render_rich

    for section in sections:
        out.print(text(section.title, "bold"))
        render_rich(section.tables, out)
        for what, note in section.items:
            out.print(text(f"{what}: {note}"))

"""The two text renderings of a table (core.view.Table): for the terminal (rich) and
for Markdown. The HTML report renders the same shape in its template.

Cells are plain text: each renderer escapes them (rich markup, Markdown, HTML) itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.core.view import BAD, GOOD, WARN, Table
from accelbench.report.text import escape, markdown_table, printable, text

_RICH_STYLES = {GOOD: "green", BAD: "red", WARN: "yellow"}


def render_rich(tables: Sequence[Table], console: Any) -> None:
    """Print each table on a rich console, rows coloured by their style."""
    from rich.table import Table as RichTable
    from rich.text import Text

    for t in tables:
        table = RichTable(title=text(t.title), title_justify="left", show_lines=t.ruled)
        for i, name in enumerate(t.header):
            table.add_column(text(name), justify="right" if i in t.numeric else "left",
                             overflow="fold")
        for i, row in enumerate(t.rows):
            style = t.styles[i] if i < len(t.styles) else None
            table.add_row(*(text(cell) for cell in row), style=_RICH_STYLES.get(style or ""))
        if t.notes:
            table.caption = Text("\n".join(printable(n) for n in t.notes))
            table.caption_justify = "left"
        console.print(table)


def render_markdown(tables: Sequence[Table], level: int = 2) -> str:
    """Each table under a heading of `level`, its notes as a list below it."""
    lines: list[str] = []
    for t in tables:
        lines += [f"{'#' * level} {escape(t.title)}", ""]
        lines += markdown_table(t.header, t.rows, t.numeric) if t.rows else ["(none)"]
        lines += [""] + [f"- {escape(n)}" for n in t.notes] + ([""] if t.notes else [])
    return "\n".join(lines)

"""Stored text made safe to show.

Everything in a store came from somewhere else: host names, environment variables
(`NCCL_DEBUG_FILE='[/tmp/nccl.%h.log]'` is an ordinary setting), error messages of
libraries, files merged from other sites. Shown as it is, such text can move the cursor,
clear the screen, set the window title or hide what follows (ESC and CSI sequences),
or reorder what the reader sees (bidirectional overrides). Every renderer passes stored
text through here: the terminal tables, the Markdown and HTML reports (the Jinja
environment's `finalize`), the chart labels and the CSV export (`report.csv_table`, which
also keeps a spreadsheet from running a cell as a formula).

Rich markup is not handled here: the terminal console never parses markup (see
`report.terminal.console`), so brackets in stored text are shown as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.text import Text

# Unicode "format" characters that reorder or hide text: bidirectional embeddings,
# overrides and isolates (the "Trojan Source" characters), marks, the zero-width space
# (which makes two different names look alike) and the BOM.
_BIDI = (0x061C, 0x200B, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A),
         0xFEFF)
# The line and paragraph separators: line breaks to many viewers, so they would split a
# value meant to be one line.
_SEPARATORS = (0x2028, 0x2029)
# C0 controls (ESC among them), DEL and C1 controls (0x9B is a one-byte CSI).
_CONTROLS = (*range(0x00, 0x20), *range(0x7F, 0xA0))


def _escape_of(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# The bytes of a name that is not UTF-8 (a path, a host name), as Python decodes them
# (surrogateescape: byte 0xff is U+DCFF): shown as the byte they stand for, since no
# encoder takes a lone surrogate.
_UNDECODED = {0xDC00 + byte: f"\\x{byte:02x}" for byte in range(0x80, 0x100)}
_TABLE = {code: _escape_of(code) for code in (*_CONTROLS, *_BIDI, *_SEPARATORS)} | _UNDECODED
_KEEP_LAYOUT = {ord("\n"): "\n", ord("\t"): "\t"}
# Line breaks and tabs become spaces where a value must stay on one line.
_ONE_LINE = {**_TABLE, ord("\n"): " ", ord("\r"): " ", ord("\t"): " "}
_MULTI_LINE = {**_TABLE, **_KEEP_LAYOUT}


def printable(value: Any, *, multiline: bool = False) -> str:
    """`value` as text with every control and reordering character shown as an escape
    (`\\x1b`, `\\u202e`, `\\u2028`), so it prints as what it is and does nothing to the
    terminal.

    Line breaks become spaces, unless `multiline`, which keeps line breaks and tabs (a
    table caption of several notes). Linear in the length of the text.
    """
    return str(value).translate(_MULTI_LINE if multiline else _ONE_LINE)


def escape(text: Any) -> str:
    """Keep a value inside its table cell: no pipes, no line breaks, no HTML, and no
    control characters (a report is often read with `cat`)."""
    return (
        printable(str(text).replace("\\", "\\\\")).replace("|", "\\|")
        .replace("<", "&lt;").replace(">", "&gt;")
    )


def markdown_table(header: Sequence[str], body: Sequence[Sequence[Any]],
                   numeric: Collection[int] = ()) -> list[str]:
    """The lines of a table, every cell escaped; columns in `numeric` are right-aligned."""
    lines = ["| " + " | ".join(escape(h) for h in header) + " |",
             "|" + "|".join("---:" if i in numeric else "---" for i in range(len(header)))
             + "|"]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in body]
    return lines


def text(value: object, style: str = "", *, multiline: bool = False) -> Text:
    """Stored text as a rich Text: shown literally, control characters escaped."""
    from rich.text import Text

    return Text(printable(value, multiline=multiline), style=style)

"""Stored runs as CSV: one row per figure, for spreadsheets.

CSV is a presentation of the figures, like the reports (the JSON export of
`store.export` is the faithful, reloadable form): every text cell passes through
`report.text.printable`, so no control or reordering character is written (line breaks
and tabs are kept, which CSV quotes), and text that a spreadsheet would run as a
formula is marked as text.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from typing import IO, Any

from accelbench.report.text import printable
from accelbench.store import StoredRun

CSV_COLUMNS = (
    "run_id", "generation_key", "device", "benchmark", "case", "params", "dtype", "status",
    "reason", "figure", "value", "unit", "low", "high", "pct_of_peak", "median_s",
    "ci_low_s", "ci_high_s", "samples", "processes", "contended", "warnings",
)


def write_csv(runs: Iterable[StoredRun], fileobj: IO[str]) -> None:
    """One row per figure of each measurement; one row with empty figure columns for a
    measurement without figures (failed, skipped). `samples` is the number of samples,
    `processes` of the worker processes they came from; `median_s` and its interval are the
    time per call the figures derive from. Text is written printable (`_csv_cell`), and
    text that a spreadsheet would run as a formula (a cell starting with =, +, -, @) is
    written with a leading apostrophe."""
    writer = csv.writer(fileobj)
    writer.writerow(CSV_COLUMNS)
    for run in runs:
        for m in run.measurements:
            case = m.case
            spread = m.spread
            common = [
                run.record.id, run.record.generation_key, case.device, case.benchmark,
                case.label, json.dumps(case.param_dict, default=str), case.dtype, m.status,
                m.reason,
            ]
            tail = [
                spread.center if spread else None,
                spread.low if spread else None,
                spread.high if spread else None,
                len(m.samples),
                len(m.timings),
                "yes" if m.contended else "no",
                "; ".join(m.warnings),
            ]
            figures = [[f.name, f.value, f.unit, f.low, f.high, f.pct_of_peak]
                       for f in m.figures]
            for figure in figures or [[None] * 6]:
                writer.writerow(["" if v is None else _csv_cell(v)
                                 for v in [*common, *figure, *tail]])


# A cell starting with one of these is run as a formula by spreadsheets (OWASP's list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def _csv_cell(value: Any) -> Any:
    """A value for a CSV cell that a spreadsheet shows and never evaluates, and that writes
    no control character: text is made printable (line breaks and tabs kept), and text
    that starts like a formula gets a leading apostrophe, the mark spreadsheets read as
    "this is text". Numbers (a negative value is a number, not a formula) pass as they
    are."""
    if not isinstance(value, str):
        return value
    value = printable(value, multiline=True)
    return "'" + value if value.startswith(_FORMULA_START) else value

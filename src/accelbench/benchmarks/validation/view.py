"""What validation checks add to a run's report: a pass/fail matrix per check and
precision, and one line per check (failing ones first), before the results."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelbench.analysis.checks import (
    FAIL,
    PASS,
    SHOWN,
    SKIP,
    CheckResult,
    check_results,
    format_figure,
    matrix,
    tally,
)
from accelbench.core.measurement import Measurement
from accelbench.core.units import MISSING, format_pct
from accelbench.core.view import BAD, GOOD, WARN, Section, Table

TITLE = "Validation checks"
HEADER = ("Check", "Precision", "Verdict", "Error", "Tolerance", "Margin", "Reason")
MATRIX_TITLE = "Validation: verdict per check and precision"
ABOUT = (
    "Each check compares what the stack computed with a float64 reference on the same "
    "inputs, an exact expectation or a stated limit. Error is what it found where it came "
    "closest to its tolerance; margin is how far inside the tolerance that is (100% for no "
    "error, below 0 outside it). Tolerances are torch.testing's per precision unless the "
    "check states its own."
)
_STYLES = {PASS: None, FAIL: BAD, SKIP: WARN}


def checks_table(results: Sequence[CheckResult]) -> Table | None:
    if not results:
        return None
    rows = [(r.name, r.precision or MISSING, r.shown,
             format_figure(r.error, r.unit), format_figure(r.tolerance, r.unit),
             format_pct(r.margin), r.coded_reason) for r in results]
    counts = tally(results)
    note = (f"{len(results)} checks: {counts[PASS]} passed, {counts[FAIL]} failed, "
            f"{counts[SKIP]} skipped.")
    return Table(TITLE, HEADER, rows, [note], numeric=frozenset({3, 4, 5}),
                 styles=[_STYLES[r.verdict] for r in results])


def matrix_table(results: Iterable[CheckResult]) -> Table | None:
    m = matrix(results)
    if not m.rows:
        return None
    rows = [(row, *(SHOWN.get(m.cells.get((row, p), ""), "") for p in m.precisions))
            for row in m.rows]
    styles: list[str | None] = [BAD if row in m.failing else GOOD for row in m.rows]
    return Table(MATRIX_TITLE, ("Check", *m.precisions), rows,
                 ["Failing checks first; an empty cell was not planned."], styles=styles)


def validation_tables(measurements: Iterable[Measurement]) -> list[Table]:
    """The matrix and the per-check table of the checks among `measurements` (none
    when there is no check)."""
    results = check_results(measurements)
    return [t for t in (matrix_table(results), checks_table(results)) if t is not None]


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    """The Validation section, first in the report: what the run checked."""
    tables = validation_tables(measurements)
    if not tables:
        return []
    return [Section("validation", "Validation", tuple(tables), ABOUT, first=True)]

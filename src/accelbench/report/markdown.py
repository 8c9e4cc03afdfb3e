"""Markdown: the one table writer every Markdown output uses, and the report of one run,
for a file or for pasting into an issue."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from accelbench.core.measurement import Measurement
from accelbench.report.fingerprint import rows as fingerprint_rows
from accelbench.report.table import COLUMNS, counts, rows
from accelbench.report.text import printable
from accelbench.report.units import format_timestamp


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


def run_report(
    record: Any,
    fingerprint: dict[str, Any],
    measurements: Sequence[Measurement],
    profiles: Sequence[Any] = (),
) -> str:
    """`record` is a store RunRecord (id, started_at, status, suite, generation_key)."""
    from accelbench.report.energy import ABOUT as ENERGY_ABOUT
    from accelbench.report.energy import energy_table
    from accelbench.report.tables import render_markdown
    from accelbench.report.validation import ABOUT as VALIDATION_ABOUT
    from accelbench.report.validation import validation_tables

    tally = counts(measurements)
    lines = [
        f"# accelbench run {escape(record.id)}",
        "",
        f"- Stack: {escape(record.generation_key)}",
        f"- Suite: {escape(record.suite or '-')}; status: {escape(record.status)}; "
        f"started {format_timestamp(record.started_at, seconds=True)} UTC",
        f"- Cases: {tally['ok']} ok, {tally['failed']} failed, {tally['skipped']} skipped",
        "",
    ]
    checks = validation_tables(measurements)
    if checks:
        lines += ["## Validation", "", escape(VALIDATION_ABOUT), "",
                  render_markdown(checks, level=3)]
    measured = [m for m in measurements if m.case.family != "validation"]
    if measured or not checks:
        body = [r.cells() for r in rows(measured)]
        lines += ["## Results", ""]
        lines += markdown_table(COLUMNS, body) if body else ["No case was measured."]
    notes = [(r.benchmark, r.params, r.note) for r in rows(measured) if r.note]
    if notes:
        lines += ["", "## Failures and warnings", ""]
        lines += [f"- **{escape(b)}** {escape(p)}: {escape(n)}" for b, p, n in notes]
    from accelbench.report.engines import engines_tables
    from accelbench.report.tables import render_markdown

    engines = engines_tables(measurements)
    if engines:
        lines += ["", render_markdown(engines, level=2).rstrip()]
    from accelbench.report.isolate import ABOUT as ISOLATE_ABOUT
    from accelbench.report.isolate import isolate_tables

    isolate = isolate_tables(measurements)
    if isolate:
        lines += ["", "## Isolate", "", escape(ISOLATE_ABOUT), "",
                  render_markdown(isolate, level=3).rstrip()]
    energy = energy_table(measurements)
    if energy is not None:
        lines += ["", f"## {escape(energy.title)}", "", escape(ENERGY_ABOUT), ""]
        lines += markdown_table(energy.header, energy.rows, energy.numeric)
        lines += [""] + [f"- {escape(n)}" for n in energy.notes]
    if profiles:
        from accelbench.report.profile import profile_markdown

        lines += ["", "## Profiles", ""]
        lines += [profile_markdown(p.analysis, f"Profile of {p.label}") for p in profiles]
    lines += ["", "## Stack", ""]
    lines += markdown_table(("Property", "Value"), fingerprint_rows(fingerprint))
    lines += [
        "",
        "## How to read these numbers",
        "",
        "Each result is the median of repeated samples after a warm-up, over several fresh "
        "worker processes when n says 'in P'; rates are work per call over that time per "
        "call. The CI column is the half-width of the stated 95% interval, relative to the "
        "result: between processes, where a repeat run's figure is expected to fall; "
        "within one process, the order-statistic CI of its median. "
        "Percentages are of the device's published dense peak for that precision; '-' "
        "where no peak is published. Rows marked noisy have a wide interval or spread; "
        "rows marked contended were measured while the host was busy with other work.",
        "",
    ]
    return "\n".join(lines)

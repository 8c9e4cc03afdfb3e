"""Markdown: the report of one run, for a file or for pasting into an issue. Its sections
are the run view's (report.run_view); tables are written by report.tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.core.measurement import Measurement
from accelbench.core.units import format_timestamp
from accelbench.report.fingerprint import rows as fingerprint_rows
from accelbench.report.request import request_rows
from accelbench.report.results import CI_NOTE, counts
from accelbench.report.text import escape, markdown_table


def run_report(
    record: Any,
    fingerprint: dict[str, Any],
    measurements: Sequence[Measurement],
    profiles: Sequence[Any] = (),
) -> str:
    """`record` is a store RunRecord (id, started_at, status, suite, generation_key):
    its header, the run's sections (report.run_view), then its stack."""
    from accelbench.report.run_view import run_sections
    from accelbench.report.tables import render_markdown

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
    for section in run_sections(measurements, profiles):
        lines += [f"## {escape(section.title)}", ""]
        if section.about:
            lines += [escape(section.about), ""]
        if section.tables:
            lines += [render_markdown(section.tables, level=3).rstrip(), ""]
        if section.items:
            lines += [f"- **{escape(what)}**: {escape(note)}" for what, note in section.items]
            lines += [""]
    asked = request_rows(getattr(record, "request", None))
    if asked:
        lines += ["## Request", "",
                  "What the run was asked for (`accelbench show RUN --request` prints it as "
                  "JSON, which `accelbench run --request FILE` runs again).", ""]
        lines += markdown_table(("Field", "Value"), asked)
        lines += [""]
    lines += ["## Stack", ""]
    lines += markdown_table(("Property", "Value"), fingerprint_rows(fingerprint))
    lines += [
        "",
        "## How to read these numbers",
        "",
        "Each result is the median of repeated samples after a warm-up, over several fresh "
        "worker processes when n says 'in P'; rates are work per call over that time per "
        f"call. {CI_NOTE} "
        "Percentages are of the device's published dense peak for that precision; '-' "
        "where no peak is published. Rows marked noisy have a wide interval or spread; "
        "rows marked contended were measured while the host was busy with other work.",
        "",
    ]
    return "\n".join(lines)

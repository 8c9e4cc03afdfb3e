"""Analysis results as plain tables (title, header, rows, notes) that the terminal,
Markdown and HTML outputs each render their own way.

Cells are plain text: renderers escape them (rich markup, Markdown, HTML) themselves.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.analysis.compare import FASTER, SLOWER, Comparison
from accelbench.analysis.diagnose import Diagnosis
from accelbench.analysis.generations import Generations
from accelbench.analysis.history import Series
from accelbench.report.units import format_value

GOOD = "good"
BAD = "bad"


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]
    notes: list[str] = field(default_factory=list)
    numeric: frozenset[int] = frozenset()  # columns to right-align
    styles: list[str | None] = field(default_factory=list)  # per row: GOOD, BAD or None


def fmt_ratio(value: float, low: float | None = None, high: float | None = None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    text = f"{value:.3f}"
    if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
        text += f" [{low:.3f}, {high:.3f}]"
    return text


def fmt_change(fraction: float) -> str:
    return "-" if not math.isfinite(fraction) else f"{100 * fraction:+.1f}%"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "-"
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def fmt_time(timestamp: float) -> str:
    return f"{dt.datetime.fromtimestamp(timestamp, dt.timezone.utc):%Y-%m-%d %H:%M}"


# -- compare -----------------------------------------------------------------------------


def comparison_tables(c: Comparison) -> list[Table]:
    pct = f"{100 * (1 - c.alpha):g}%"
    rows, styles = [], []
    for case in c.cases:
        verdict = case.verdict
        if case.below_min_effect:
            verdict += f" (below {100 * c.min_effect:g}%)"
        rows.append((
            case.label,
            format_value(case.a.median, case.unit),
            format_value(case.b.median, case.unit),
            fmt_ratio(case.ratio.ratio, case.ratio.low, case.ratio.high),
            fmt_change(case.change),
            fmt_p(case.test.p_value) if case.test.p_value is not None else "ci",
            verdict,
        ))
        styles.append(GOOD if case.verdict == FASTER else BAD if case.verdict == SLOWER
                      else None)
    notes = [
        f"B/A: ratio of medians of the headline figure with its {pct} CI "
        f"(bootstrap; order statistics under 5 samples); change: in speed, + is faster. "
        f"p: Mann-Whitney U, 'ci': too few samples, CIs of the medians compared. "
        f"A change is reported when p < {c.alpha:g} and it is at least "
        f"{100 * c.min_effect:g}%."
    ]
    main = Table(
        f"B: {c.b.label} ({', '.join(c.b.generation_keys)}) vs "
        f"A: {c.a.label} ({', '.join(c.a.generation_keys)})",
        ("Case", "A", "B", f"B/A [{pct} CI]", "Change", "p", "Verdict"),
        rows, notes, frozenset({1, 2, 3, 4, 5}), styles,
    )
    families = Table(
        "Geometric mean per family (speed, B over A)",
        ("Family", "Cases", "Geometric mean", "Faster", "Slower"),
        [(f.family, str(f.n), fmt_ratio(f.geomean), str(f.faster), str(f.slower))
         for f in c.families],
        numeric=frozenset({1, 2, 3, 4}),
    )
    unpaired = [*c.only_a, *c.only_b, *c.version_differs, *c.not_measured]
    tables = [main, families]
    if unpaired:
        tables.append(Table("Not compared", ("Case", "Why"),
                            [(u.label, u.reason) for u in unpaired]))
    return tables


# -- generations -------------------------------------------------------------------------


def generations_table(g: Generations) -> Table:
    header = ("Case", "Precision", "Figure",
              *(f"{key}{' (baseline)' if key == g.baseline else ''}" for key in g.keys))
    rows = []
    for row in g.rows:
        cells = []
        for key in g.keys:
            cell = row.cells.get(key)
            if cell is None:
                cells.append("-")
                continue
            text = format_value(cell.value, row.unit)
            rel = cell.versus_baseline
            if key == g.baseline:
                low, high = cell.results.median_ci()
                noise = (high - low) / 2 / cell.value if cell.value else math.nan
                text += f" = 1.00x ±{100 * noise:.1f}%" if math.isfinite(noise) else " = 1.00x"
            elif rel is not None:
                text += f" = {rel.ratio:.2f}x ±{100 * rel.rel_half_width:.1f}%"
            elif cell.note:
                text += f" ({cell.note})"
            cells.append(text)
        rows.append((row.label, row.dtype, row.figure, *cells))
    filters = ", ".join(
        f"{k}={','.join(v) if isinstance(v, list) else v}"
        for k, v in g.filters.items() if v not in (None, [], ""))
    notes = [
        "Each cell: the generation's median (samples of all its runs pooled) and its speed "
        "relative to the baseline generation, ± the half-width of the 95% CI of that ratio "
        "(on the baseline: of its own median)."
    ]
    if filters:
        notes.append(f"Filters: {filters}.")
    return Table(f"Generations, normalised to {g.baseline}", header, rows, notes,
                 frozenset(range(3, len(header))))


# -- history -----------------------------------------------------------------------------


def history_tables(series: Sequence[Series]) -> list[Table]:
    tables = []
    for s in series:
        starts = {c.index: c for c in s.change_points}
        rows, styles = [], []
        for i, p in enumerate(s.points):
            change = starts.get(i)
            mark = change.describe() if change else ""
            rows.append((p.run_id, fmt_time(p.started_at), p.host,
                         format_value(p.value, s.unit),
                         f"[{format_value(p.ci_low, s.unit)}, {format_value(p.ci_high, s.unit)}]",
                         str(p.samples), mark))
            styles.append(None if change is None else BAD if change.kind == "regressed"
                          else GOOD)
        notes = [c.describe() for c in s.change_points] or ["no change point"]
        if s.small_steps:
            notes.append(f"{s.small_steps} smaller step(s) below the minimum effect")
        tables.append(Table(
            f"{s.case.label} on {s.generation_key} ({s.figure}, version {s.case.version})",
            ("Run", "Started (UTC)", "Host", "Value", "95% CI", "n", "Change"),
            rows, notes, frozenset({3, 4, 5}), styles,
        ))
    return tables


# -- diagnose ----------------------------------------------------------------------------


def diagnosis_table(d: Diagnosis) -> Table:
    rows = []
    for node in d.failing:
        for finding, count in node.worst_by_rule():
            observed = "-" if finding.observed is None else f"{finding.observed:.3g}"
            off = "-" if finding.off_by is None else f"{100 * finding.off_by:.1f}%"
            case = finding.case + (f" (+{count - 1} more)" if count > 1 else "")
            what = finding.compare + (f" {finding.figure}" if finding.figure else "")
            rows.append((node.node, finding.rule, finding.category, case, what, observed,
                         finding.detail or finding.limit, off))
    failing = d.failing
    summary = (f"{len(failing)} of {len(d.nodes)} nodes fail: "
               + ", ".join(f"{n.node} ({', '.join(n.categories)})" for n in failing)
               if failing else f"all {len(d.nodes)} nodes pass")
    notes = [summary, *(f"baseline: {b.source}" for b in d.baselines), *d.notes]
    return Table("Diagnosis", ("Node", "Rule", "Category", "Case", "Compared", "Observed",
                               "Limit", "Off by"), rows, notes, frozenset({5, 7}),
                 [BAD] * len(rows))


# -- rendering ---------------------------------------------------------------------------


def render_rich(tables: Sequence[Table], console: Any) -> None:
    from rich.table import Table as RichTable
    from rich.text import Text

    for t in tables:
        table = RichTable(title=Text(t.title), title_justify="left")
        for i, name in enumerate(t.header):
            table.add_column(Text(name), justify="right" if i in t.numeric else "left",
                             overflow="fold")
        for i, row in enumerate(t.rows):
            style = t.styles[i] if i < len(t.styles) else None
            table.add_row(*(Text(cell) for cell in row),
                          style={GOOD: "green", BAD: "red"}.get(style or ""))
        if t.notes:
            table.caption = Text("\n".join(t.notes))
            table.caption_justify = "left"
        console.print(table)


def render_markdown(tables: Sequence[Table], level: int = 2) -> str:
    from accelbench.report.markdown import escape

    lines: list[str] = []
    for t in tables:
        lines += [f"{'#' * level} {escape(t.title)}", ""]
        if t.rows:
            lines.append("| " + " | ".join(escape(h) for h in t.header) + " |")
            lines.append("|" + "|".join("---:" if i in t.numeric else "---"
                                        for i in range(len(t.header))) + "|")
            lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in t.rows]
        else:
            lines.append("(none)")
        lines += [""] + [f"- {escape(n)}" for n in t.notes] + ([""] if t.notes else [])
    return "\n".join(lines)

"""A self-contained HTML report: inline CSS and SVG, no script, no external resource, so
it opens from disk anywhere. Rendered by Jinja2 with autoescaping on, so every string
from a result or a fingerprint (host names, labels, parameters) reaches the page as
text; the only markup not escaped is the SVG that `charts` draws (matplotlib escapes
the text inside it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from accelbench.core.units import format_timestamp
from accelbench.core.view import BarSeries, Section
from accelbench.report import charts
from accelbench.report.results import CI_NOTE, COLUMNS, counts
from accelbench.report.run_view import run_sections
from accelbench.report.text import printable
from accelbench.store import StoredRun
from accelbench.version import __version__

# What a chart's marks mean, in its legend and caption.
BUSY = "busy host or throttled"
MARKS = (f"Ring: {BUSY} (its figure is not to be trusted). Triangle: the interval runs "
         "past the axis, which is set by the figures.")


@dataclass
class Chart:
    title: str
    svg: str
    caption: str = ""


@dataclass
class RunView:
    """One run as the template shows it: its record, the run view's sections (in the
    order every output shows them) and the charts of each section, by its key."""

    anchor: str
    record: Any
    started: str
    tally: dict[str, int]
    fingerprint: list[tuple[str, str]]
    sections: list[Section]
    charts: dict[str, list[Chart]]
    request: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Analysis:
    anchor: str
    title: str
    tables: list[Any]
    charts: list[Chart] = field(default_factory=list)


def html_report(
    runs: Sequence[StoredRun],
    *,
    comparisons: Sequence[Any] = (),
    generations: Any = None,
    title: str | None = None,
    generated_at: float | None = None,
    profiles: Any = None,
    ab_results: Sequence[Any] = (),
) -> str:
    """The report of `runs` (each shown in full, with its stored profiles by run id), and
    optionally of comparisons (analysis.compare.Comparison) and of generations
    (analysis.generations.Generations), and of A/Bs (analysis.ab.AbResult)."""
    ids = (f"chart-{i}" for i in count(1))
    analyses = [_ab(result, ids) for result in ab_results]
    for i, c in enumerate(comparisons, 1):
        analyses.append(_comparison(c, f"comparison-{i}", ids))
    if generations is not None and generations.rows:
        analyses.append(_generations(generations, ids))
    views = [_run_view(run, f"run-{i}", ids, (profiles or {}).get(run.record.id, ()))
             for i, run in enumerate(runs, 1)]
    when = generated_at if generated_at is not None else time.time()
    if title is None:
        title = (f"accelbench run {runs[0].record.id}" if len(runs) == 1
                 else f"accelbench report: {len(runs)} runs")
    return str(_template().render(
        title=title, generated=f"{format_timestamp(when)} UTC", version=__version__,
        runs=views, analyses=analyses, columns=COLUMNS, ci_note=CI_NOTE,
    ))


def _template() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("accelbench.report", "templates"),
        autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        finalize=_shown,
    )
    return env.get_template("report.html.j2")


def _shown(value: Any) -> Any:
    """A value as the template shows it, before escaping: text made printable (line
    breaks and tabs kept, being only white space in HTML); markup (the charts' SVG, the
    output of macros) as it is."""
    if hasattr(value, "__html__"):
        return value
    return printable(value, multiline=True)


def _markup(svg: str) -> Any:
    from markupsafe import Markup

    return Markup(svg)  # matplotlib's SVG: matplotlib escaped the text in it


# -- one run -----------------------------------------------------------------------------


def _run_view(run: StoredRun, anchor: str, ids: Any, profiles: Sequence[Any]) -> RunView:
    from accelbench.report.fingerprint import flatten
    from accelbench.report.fingerprint import rows as fingerprint_rows
    from accelbench.report.request import request_rows

    record = run.record
    sections = run_sections(run.measurements, profiles)
    drawn = {s.key: [Chart(c.title, _markup(charts.draw(c, next(ids))), c.caption)
                     for c in s.charts] for s in sections}
    fingerprint = fingerprint_rows(run.fingerprint) or flatten(run.fingerprint)
    started = format_timestamp(record.started_at, seconds=True)
    return RunView(anchor, record, f"{started} UTC", counts(run.measurements), fingerprint,
                   sections, drawn, request_rows(record.request))


# -- analyses ----------------------------------------------------------------------------


def _comparison(c: Any, anchor: str, ids: Any) -> Analysis:
    from accelbench.analysis.generations import short_labels
    from accelbench.report.analysis_tables import comparison_tables

    tables = comparison_tables(c)
    chart_list = []
    if c.cases:
        labels = short_labels([case.b.case for case in c.cases], dtype=True)
        series = BarSeries(
            "B/A", [case.speed.ratio for case in c.cases],
            [(case.speed.low, case.speed.high) for case in c.cases],
            marked=[i for i, case in enumerate(c.cases) if _doubtful(case.a, case.b)])
        svg = charts.bar_chart(next(ids), labels, [series], ylabel="speed, B over A",
                               reference=1.0, horizontal=True, marked_label=BUSY)
        chart_list.append(Chart("Speed of B relative to A per case", _markup(svg),
                                f"Above 1: B is faster. Whiskers: CI of the ratio. {MARKS}"))
    return Analysis(anchor, f"Comparison: {c.b.label} against {c.a.label}", tables, chart_list)


def _ab(result: Any, ids: Any) -> Analysis:
    from accelbench.report.ab_tables import ab_tables

    drawn = ab_chart(result, next(ids))
    return Analysis(f"ab-{result.id}", f"A/B {result.id}: {result.label('b')} against "
                    f"{result.label('a')}", ab_tables(result),
                    [drawn] if drawn is not None else [])


def ab_chart(result: Any, chart_id: str) -> Chart | None:
    """B's speed over A's per case of an A/B (analysis.ab.AbResult), with its interval;
    None when no case was judged. An interval beyond the chart's range is cut at it."""
    from accelbench.analysis.generations import short_labels

    judged = [c for c in result.cases if c.verdict is not None]
    if not judged:
        return None
    labels = short_labels([_case_of(result, c.key) for c in judged], dtype=True)
    values = [c.verdict.speed for c in judged]
    # An unbounded end (a case undecided after a pair or two) runs past the axis.
    past = 2.0 * (charts.bar_limit(values, 1.0) or 1.0)
    series = BarSeries("B/A", values, [(max(0.0, c.verdict.speed_low),
                                        min(past, c.verdict.speed_high)) for c in judged],
                       marked=[i for i, c in enumerate(judged)
                               if _doubtful(*_sides_of(result, c.key))])
    svg = charts.bar_chart(chart_id, labels, [series], ylabel="speed, B over A",
                           reference=1.0, horizontal=True, marked_label=BUSY)
    return Chart("Speed of B relative to A per case", _markup(svg),
                 "Above 1: B is faster. Whiskers: the repeated confidence interval of the pairs' "
                 f"ratio. {MARKS}")


def _case_of(result: Any, key: str) -> Any:
    return next(m.case for m in result.a.measurements if m.case.key == key)


def _sides_of(result: Any, key: str) -> tuple[Any, ...]:
    """The measurements of case `key` on each side of an A/B that has it."""
    return tuple(m for run in (result.a, result.b) for m in run.measurements
                 if m.case.key == key)


def _doubtful(*sides: Any) -> bool:
    """Some figure of the sides (measurements or a comparison's CaseResults) was measured
    on a busy host or a throttled device."""
    return any(s is not None and (s.contended or s.throttled) for s in sides)


def _generations(g: Any, ids: Any) -> Analysis:
    from accelbench.report.analysis_tables import generations_table

    return Analysis("generations", "Generations", [generations_table(g)],
                    [generation_chart(g, next(ids))])


def generation_chart(g: Any, chart_id: str, *, standalone: bool = False) -> Chart:
    """Speed of every row relative to the baseline generation: one group of bars per row
    (case and precision), one bar per generation."""
    dtypes = {r.dtype for r in g.rows}
    labels = [f"{r.label} {r.dtype}" if len(dtypes) > 1 else r.label for r in g.rows]
    series = []
    for key in g.keys:
        values: list[float | None] = []
        errors: list[tuple[float, float] | None] = []
        marked = []
        for i, r in enumerate(g.rows):
            cell = r.cells.get(key)
            rel = cell.versus_baseline if cell else None
            if cell is not None and _doubtful(cell.results):
                marked.append(i)
            if key == g.baseline and cell is not None:
                values.append(1.0)
                errors.append(None)
            else:
                values.append(rel.ratio if rel else None)
                errors.append((rel.low, rel.high) if rel else None)
        series.append(BarSeries(key, values, errors, marked=marked))
    figures = sorted({r.figure for r in g.rows})
    svg = charts.bar_chart(chart_id, labels, series, ylabel=f"{', '.join(figures)}, x baseline",
                           reference=1.0, marked_label=BUSY, standalone=standalone)
    return Chart(f"{', '.join(figures)} relative to {g.baseline}",
                 svg if standalone else _markup(svg),
                 f"Whiskers: 95% CI of the ratio to the baseline generation. {MARKS}")

"""A self-contained HTML report: inline CSS and SVG, no script, no external resource, so
it opens from disk anywhere. Rendered by Jinja2 with autoescaping on, so every string
from a result or a fingerprint (host names, labels, parameters) reaches the page as
text; the only markup not escaped is the SVG that `charts` draws (matplotlib escapes
the text inside it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from accelbench import __version__
from accelbench.analysis.engines import engine_groups
from accelbench.analysis.values import case_mode
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from accelbench.core.stats import median_ci
from accelbench.report import charts
from accelbench.report.energy import case_label, has_telemetry, trace
from accelbench.report.run_view import Section, run_sections
from accelbench.report.table import COLUMNS, counts
from accelbench.report.text import printable
from accelbench.report.units import axis_scale, format_params, format_timestamp
from accelbench.store import StoredRun


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
) -> str:
    """The report of `runs` (each shown in full, with its stored profiles by run id), and
    optionally of comparisons (analysis.compare.Comparison) and of generations
    (analysis.generations.Generations)."""
    ids = (f"chart-{i}" for i in count(1))
    analyses = []
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
        runs=views, analyses=analyses, columns=COLUMNS,
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

    record = run.record
    sections = run_sections(run.measurements, profiles)
    keys = {s.key for s in sections}
    charts = _run_charts(run, ids)
    if "isolate" in keys:
        charts["isolate"] = _isolate_charts(run.measurements, ids)
    if "energy" in keys:
        charts["energy"] = [c for m in run.measurements if has_telemetry(m)
                            for c in [_telemetry_chart(m, ids)] if c is not None]
    # A chart whose section the run does not have goes with the results.
    for key in [k for k in charts if k not in keys]:
        charts.setdefault("results", []).extend(charts.pop(key))
    fingerprint = fingerprint_rows(run.fingerprint) or flatten(run.fingerprint)
    started = format_timestamp(record.started_at, seconds=True)
    return RunView(anchor, record, f"{started} UTC", counts(run.measurements), fingerprint,
                   sections, charts)


def _telemetry_chart(m: Measurement, ids: Any) -> Chart | None:
    """Power and GFX clock over the case, from its first process's series, the timed
    window shaded; None when that series has neither."""
    shown = trace(m)
    if shown is None:
        return None
    panels = [charts.Panel("power (W)", shown.power_w, from_zero=True),
              charts.Panel("GFX clock (MHz)", shown.clock_mhz, color="#c05020")]
    svg = charts.time_chart(next(ids), shown.t, panels, xlabel="time (s)",
                            window=shown.window, window_label="timed")
    which = (f"process 1 of {shown.processes}" if shown.processes > 1
             else "its one process")
    caption = f"From the series of {which}."
    if shown.window is not None:
        caption += " Shaded: the timed part."
    return Chart(f"Power and clock: {case_label(m)}", _markup(svg), caption)


def _run_charts(run: StoredRun, ids: Any) -> dict[str, list[Chart]]:
    """The charts of the results, collectives and engines sections."""
    ok = [m for m in run.measurements if m.ok and m.primary is not None]
    out: list[Chart] = []
    micro: dict[tuple[str, str], list[Measurement]] = {}
    for m in ok:
        if m.case.family == "micro" and m.primary is not None:
            micro.setdefault((m.case.benchmark, m.primary.unit), []).append(m)
    for (bench, unit), ms in micro.items():
        out.append(_micro_chart(bench, unit, ms, next(ids)))
    collectives = [m for m in ok if m.case.family == "collective"
                   and m.case.benchmark != "isolate"  # drawn as heat maps of its own
                   and _is_size(m.case.param_dict.get("bytes"))]
    sweeps = [_collective_chart(collectives, next(ids))] if collectives else []
    models = [m for m in ok if m.case.family == "model"
              and m.primary is not None and m.primary.higher_is_better]
    for mode in dict.fromkeys(case_mode(m.case) for m in models):
        chosen = [m for m in models if case_mode(m.case) == mode]
        out.append(_model_chart(mode or "", chosen, next(ids)))
    engines = [_engine_chart(g, next(ids)) for g in engine_groups(run.measurements)
               if sum(r.measurement.ok for r in g.rows) > 1]
    return {"results": out, "collectives": sweeps, "engines": engines}


def _isolate_charts(measurements: Sequence[Measurement], ids: Any) -> list[Chart]:
    """A heat map per fabric (the nodes, the ranks of each node) of the bus bandwidth and
    of the latency of every pair, the named members marked."""
    from accelbench.analysis.isolate import isolate_results
    from accelbench.benchmarks.isolate.verdict import BY_NAME
    from accelbench.report.isolate import HEAT_METRICS, fabric_title
    from accelbench.report.units import format_value

    out = []
    for r in isolate_results(measurements):
        for f in r.verdict.fabrics:
            marked = [m for n in f.named for m in (n.name.split("-") if n.what == "link"
                                                   else [n.name])]
            for name in HEAT_METRICS:
                metric = BY_NAME[name]
                matrix = f.matrices.get(name, [])
                factor, shown = axis_scale([v for row in matrix for v in row], metric.unit)
                scaled = [[None if v is None else v / factor for v in row] for row in matrix]
                cells = [["" if v is None else format_value(v, metric.unit) for v in row]
                         for row in matrix]
                svg = charts.heat_map(next(ids), list(f.members), scaled,
                                      colorbar_label=f"{metric.title} ({shown})",
                                      cells=cells, low_is_bad=metric.higher_is_better,
                                      marked=marked)
                named = ", ".join(dict.fromkeys(n.name for n in f.named)) or "none"
                out.append(Chart(f"Isolate: {metric.title}, {fabric_title(f)}", _markup(svg),
                                 f"Named slow: {named} (in red). Dark: slow."))
    return out


def _engine_chart(group: Any, chart_id: str) -> Chart:
    """Each engine's speed-up over eager in one group (model, precision, batch)."""
    from accelbench.report.engines import group_title, speedup_series

    labels, values, errors = speedup_series(group)
    svg = charts.bar_chart(chart_id, labels, [charts.BarSeries("speed-up", values, errors)],
                           ylabel="speed-up over eager (x)", reference=1.0, horizontal=True)
    return Chart(f"Speed-up over eager: {group_title(group).removeprefix('Engines: ')}",
                 _markup(svg), "Above 1: faster than eager. Whiskers: 95% CI of the ratio. "
                 "Missing bars: the engine failed or was skipped.")


def _is_size(value: object) -> bool:
    """A message size a chart can place on its axis (a merged record may hold anything)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _value_ci(m: Measurement) -> tuple[float, float, float]:
    """The headline figure with the 95% CI of its median, on the figure's own scale."""
    from accelbench.analysis.values import value_samples

    values = value_samples(m)
    value = m.primary.value if m.primary else math.nan
    if values.size < 2:
        return value, value, value
    low, high, _ = median_ci(values)
    return value, low, high


def _micro_chart(bench: str, unit: str, ms: list[Measurement], chart_id: str) -> Chart:
    """% of the published peak per case; the figure itself where a peak is not known."""
    from accelbench.analysis.generations import short_labels

    labels = short_labels([m.case for m in ms], dtype=True)
    labels = [format_params(m.case.params) if label == bench else label
              for label, m in zip(labels, ms, strict=True)]
    peaks = [m.primary.peak if m.primary else None for m in ms]
    stats = [_value_ci(m) for m in ms]
    if all(peaks):
        scales = [100.0 / p for p in peaks if p]
        ylabel, title = "% of peak", f"{bench}: % of the published peak"
    else:
        factor, shown = axis_scale([v for v, _, _ in stats], unit)
        scales = [1.0 / factor] * len(ms)
        ylabel, title = shown, f"{bench} ({shown}; no published peak for this device)"
    values = [v * k for (v, _, _), k in zip(stats, scales, strict=True)]
    errors = [(lo * k, hi * k) for (_, lo, hi), k in zip(stats, scales, strict=True)]
    svg = charts.bar_chart(chart_id, labels, [charts.BarSeries(bench, values, errors)],
                           ylabel=ylabel)
    return Chart(title, _markup(svg), "Bars: median; whiskers: 95% CI of the median.")


def _collective_chart(ms: list[Measurement], chart_id: str) -> Chart:
    """Bus bandwidth against message size: one line per operation (and whatever else
    differs between the cases besides the size)."""
    from accelbench.analysis.generations import short_labels

    lines: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    representatives: dict[tuple[Any, ...], Case] = {}
    unit = "B/s"
    for m in ms:
        fig = m.figure("busbw") or m.primary
        if fig is None:
            continue
        unit = fig.unit
        rest = tuple((k, v) for k, v in m.case.params if k != "bytes")
        representatives.setdefault(rest, Case(m.case.benchmark, m.case.version, m.case.family,
                                              rest, m.case.device))
        lines.setdefault(rest, []).append((float(m.case.param_dict["bytes"]), fig.value))
    names = short_labels(list(representatives.values()), dtype=True)
    names = [name if name != case.benchmark else str(case.param_dict.get("op", name))
             for name, case in zip(names, representatives.values(), strict=True)]
    factor, shown = axis_scale([y for pts in lines.values() for _, y in pts], unit)
    series = [
        charts.LineSeries(name, [x for x, _ in sorted(pts)], [y / factor for _, y in sorted(pts)])
        for name, pts in zip(names, lines.values(), strict=True)
    ]
    svg = charts.line_chart(chart_id, series, xlabel="message size",
                            ylabel=f"bus bandwidth ({shown})", logx=True, byte_ticks=True)
    return Chart("Collective bus bandwidth against message size", _markup(svg))


def _model_chart(mode: str, ms: list[Measurement], chart_id: str) -> Chart:
    from accelbench.analysis.generations import short_labels

    labels = short_labels([m.case for m in ms])
    categories = list(dict.fromkeys(labels))
    dtypes = list(dict.fromkeys(str(m.case.dtype) for m in ms))
    unit = ms[0].primary.unit if ms[0].primary else ""
    stats = {(label, str(m.case.dtype)): _value_ci(m)
             for label, m in zip(labels, ms, strict=True)}
    factor, shown = axis_scale([v for v, _, _ in stats.values()], unit)
    series = []
    for dtype in dtypes:
        cells = [stats.get((c, dtype)) for c in categories]
        series.append(charts.BarSeries(
            dtype, [s[0] / factor if s else None for s in cells],
            [(s[1] / factor, s[2] / factor) if s else None for s in cells]))
    name = {"train": "Training", "infer": "Inference"}.get(mode, mode or "Model")
    svg = charts.bar_chart(chart_id, categories, series, ylabel=shown)
    return Chart(f"{name} throughput per model and precision", _markup(svg),
                 "Bars: median; whiskers: 95% CI of the median.")


# -- analyses ----------------------------------------------------------------------------


def _comparison(c: Any, anchor: str, ids: Any) -> Analysis:
    from accelbench.analysis.generations import short_labels
    from accelbench.report.analysis_tables import comparison_tables

    tables = comparison_tables(c)
    chart_list = []
    if c.cases:
        labels = short_labels([case.b.case for case in c.cases], dtype=True)
        series = charts.BarSeries(
            "B/A", [case.speed.ratio for case in c.cases],
            [(case.speed.low, case.speed.high) for case in c.cases])
        svg = charts.bar_chart(next(ids), labels, [series], ylabel="speed, B over A",
                               reference=1.0, horizontal=True)
        chart_list.append(Chart("Speed of B relative to A per case", _markup(svg),
                                "Above 1: B is faster. Whiskers: CI of the ratio."))
    return Analysis(anchor, f"Comparison: {c.b.label} against {c.a.label}", tables, chart_list)


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
        for r in g.rows:
            cell = r.cells.get(key)
            rel = cell.versus_baseline if cell else None
            if key == g.baseline and cell is not None:
                values.append(1.0)
                errors.append(None)
            else:
                values.append(rel.ratio if rel else None)
                errors.append((rel.low, rel.high) if rel else None)
        series.append(charts.BarSeries(key, values, errors))
    figures = sorted({r.figure for r in g.rows})
    svg = charts.bar_chart(chart_id, labels, series, ylabel=f"{', '.join(figures)}, x baseline",
                           reference=1.0, standalone=standalone)
    return Chart(f"{', '.join(figures)} relative to {g.baseline}",
                 svg if standalone else _markup(svg),
                 "Whiskers: 95% CI of the ratio to the baseline generation.")

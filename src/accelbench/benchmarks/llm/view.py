"""What LLM serving cases add to a run's report: a table per case of its headline latency
and throughput figures at each load it was measured at (its sweep, else its own load),
and per model a Pareto chart of output tokens per device against tokens per user, as
InferenceX draws it: one line per configuration over its loads (a case's sweep, or the
cases that differ only in their load), the front of the points no other beats on both
axes, and the knee (the highest load meeting the SLO) of each line ringed. The chart is
drawn on the published site too."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from accelbench.benchmarks.llm.metrics import SLO
from accelbench.benchmarks.llm.sweep import (
    CONCURRENCY,
    DEVICE_AXIS,
    RATE,
    SLO_PERCENTILE,
    USER_AXIS,
    SweepPoint,
    knee,
    meets_slo,
    pareto,
)
from accelbench.core.case import label_value
from accelbench.core.measurement import Measurement
from accelbench.core.units import MISSING, axis_scale, format_value
from accelbench.core.view import BAD, GOOD, WARN, Lines, LineSeries, Section, Table

KEY = "llm-serving"
TITLE = "LLM serving"
ABOUT = ("Each case at each load it was measured at: TTFT, TPOT and end-to-end latency "
         "over its completed requests (vLLM's benchmark_serving definitions), completed "
         "requests and output tokens per second over the load's window, output tokens per "
         "second one user sees, and goodput (requests per second meeting every SLO bound). "
         f"A load meets the SLO when no request failed and the {SLO_PERCENTILE} of each "
         "bounded latency is within its bound; the knee is the highest load that does. The "
         "chart puts per-device throughput against per-user speed: up and to the right is "
         "better. The Results table gives the case's own figures with their intervals.")
FRONT = "Pareto front"
KNEE = "SLO knee"
FAILED = " (failed)"  # a line of the loads a failed case measured before it failed
# Parameters that set a case's load, not its configuration.
LOAD_PARAMS = (CONCURRENCY, RATE)
# After the load's column; rates in the unit the header names, so the table stays narrow.
HEADER = ("TTFT p50", f"TTFT {SLO_PERCENTILE}", f"TPOT {SLO_PERCENTILE}",
          f"E2E {SLO_PERCENTILE}", "request/s", "token/s", "token/s per user",
          "goodput request/s", "failed")
LOAD_HEADER = {CONCURRENCY: "Concurrency", RATE: "Rate (request/s)"}


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    """The section of the run's serving cases: their tables and Pareto charts (with the
    loads a failed case measured before it failed)."""
    ms = [m for m in measurements if (m.ok and m.figures) or (not m.ok and sweep_points(m))]
    if not ms:
        return []
    tables = tuple(case_table(m) for m in ms)
    return [Section(KEY, TITLE, tables, about=ABOUT, charts=tuple(pareto_charts(ms)))]


def slo_of(m: Measurement) -> SLO:
    """The SLO the case was judged by (details["slo"], seconds)."""
    stored = m.details.get("slo")
    try:
        return SLO.from_dict(stored if isinstance(stored, dict) else None)
    except (TypeError, ValueError):
        return SLO()


def sweep_points(m: Measurement) -> list[SweepPoint]:
    """The case's sweep (details["sweep"]), by load; points a store holds damaged are
    left out."""
    out = []
    for d in m.details.get("sweep") or ():
        try:
            out.append(SweepPoint.from_dict(d))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return sorted(out, key=lambda p: p.load)


def own_point(m: Measurement) -> SweepPoint:
    """A case measured at one load, as a sweep point: its load from its parameters."""
    values = {f.name: f.value for f in m.figures}
    kind, load = load_of(m)
    return SweepPoint(load, kind, values, meets_slo(values, slo_of(m)))


def load_of(m: Measurement) -> tuple[str, float]:
    """The load a case was measured at: its request rate where it has a finite one, else
    its concurrency (0: unlimited, shown as inf)."""
    params = m.case.param_dict
    rate = _number(params.get(RATE))
    if rate is not None and math.isfinite(rate) and rate > 0:
        return RATE, rate
    concurrency = _number(params.get(CONCURRENCY))
    if concurrency is not None and concurrency > 0:
        return CONCURRENCY, concurrency
    return (RATE, math.inf) if rate is not None else (CONCURRENCY, math.inf)


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def points_of(m: Measurement) -> list[SweepPoint]:
    return sweep_points(m) or [own_point(m)]


# -- tables ------------------------------------------------------------------------------


def case_table(m: Measurement) -> Table:
    """One row per load of the case; the knee (a load alone: one meeting the SLO) in
    green, loads missing the SLO marked (red where a request failed)."""
    points = points_of(m)
    best = knee(points) if m.ok else None
    slo = slo_of(m)
    rows, styles = [], []
    for p in points:
        rows.append(_row(p, len({q.kind for q in points}) > 1))
        styles.append(GOOD if p is best else None if p.meets_slo
                      else BAD if p.figures.get("failed", 0.0) > 0 else WARN)
    notes = [f"SLO: {_slo_text(slo)}."]
    if not m.ok:
        notes.append(f"The case failed ({m.reason or m.status}); the loads above were "
                     "measured before it did.")
    elif len(points) == 1:
        notes.append(f"{points[0].label}: {'meets' if best else 'misses'} the SLO.")
    elif best is not None:
        notes.append(f"Knee: {best.label}, the highest load meeting the SLO.")
    else:
        notes.append("No load met the SLO.")
    kinds = {p.kind for p in points}
    load = LOAD_HEADER[points[0].kind] if len(kinds) == 1 else "Load"
    return Table(_title(m), (load, *HEADER), rows, notes=notes,
                 numeric=frozenset(range(len(HEADER) + 1)), styles=styles)


def _row(p: SweepPoint, named: bool) -> tuple[str, ...]:
    """A load's cells; `named`: the load says its kind (a table of both kinds)."""
    f = p.figures

    def value(name: str, unit: str = "") -> str:
        v = f.get(name)
        return MISSING if v is None else format_value(v, unit)

    failed = f.get("failed")
    load = p.label if named else p.label.split(" ", 1)[1]
    return (load, value("ttft_p50", "s"), value(f"ttft_{SLO_PERCENTILE}", "s"),
            value(f"tpot_{SLO_PERCENTILE}", "s"), value(f"e2e_{SLO_PERCENTILE}", "s"),
            value("requests"), value("output_tokens"), value(USER_AXIS), value("goodput"),
            MISSING if failed is None else f"{failed:.0f}")


def _slo_text(slo: SLO) -> str:
    if not slo.bounds:
        return "no latency bound (a load meets it when no request failed)"
    return ", ".join(f"{name} {SLO_PERCENTILE} within {format_value(bound, 's')}"
                     for name, bound in slo.bounds.items())


# -- Pareto charts -----------------------------------------------------------------------


def pareto_charts(ms: Sequence[Measurement]) -> list[Lines]:
    """One chart per model: a line per configuration over its loads, the front, knees
    ringed."""
    by_model: dict[str, list[Measurement]] = {}
    for m in ms:
        by_model.setdefault(str(m.case.param_dict.get("model", "")), []).append(m)
    charts = []
    for model, group in by_model.items():
        chart = pareto_chart(model, group)
        if chart is not None:
            charts.append(chart)
    return charts


def configurations(ms: Sequence[Measurement]
                   ) -> list[tuple[str, list[SweepPoint], bool]]:
    """(name, points by load, whether it has a knee) per configuration: a case with a
    sweep is one (the loads of a failed case, measured before it failed, have none);
    cases without one that differ only in their load are one together."""
    lines: dict[tuple[Any, ...], list[SweepPoint]] = {}
    cases: dict[tuple[Any, ...], Measurement] = {}
    for i, m in enumerate(ms):
        swept = sweep_points(m)
        key: tuple[Any, ...] = (("case", i),) if swept else (
            ("benchmark", m.case.benchmark),
            *((k, repr(v)) for k, v in m.case.params if k not in LOAD_PARAMS))
        lines.setdefault(key, []).extend(swept or [own_point(m)])
        cases.setdefault(key, m)
    names = [name + ("" if cases[k].ok else FAILED)
             for name, k in zip(_names([cases[k] for k in lines]), lines, strict=True)]
    return [(name, sorted(points, key=lambda p: p.load), cases[k].ok)
            for name, (k, points) in zip(names, lines.items(), strict=True)]


def _names(ms: Sequence[Measurement]) -> list[str]:
    """What tells the configurations apart: the parameters (not the model nor the load)
    that differ between them; the engine, else the benchmark, where none does."""
    params = [m.case.param_dict for m in ms]
    varying = sorted({k for p in params for k in p if k not in (*LOAD_PARAMS, "model")
                      and len({repr(q.get(k)) for q in params}) > 1})
    names = []
    for m, p in zip(ms, params, strict=True):
        name = " ".join(f"{k}={p.get(k)}" for k in varying)
        names.append(name or str(p.get("engine", m.case.benchmark)))
    # Two configurations of the same name (one case swept twice): numbered apart.
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if names.count(name) == 1 else f"{name} ({seen[name]})")
    return out


def pareto_chart(model: str, ms: Sequence[Measurement]) -> Lines | None:
    lines = [(name, [p for p in points if _drawn(p)], kneed)
             for name, points, kneed in configurations(ms)]
    lines = [line for line in lines if line[1]]
    if not lines:
        return None
    every = [p for _, points, _ in lines for p in points]
    x_factor, x_unit = axis_scale([p.figures[USER_AXIS] for p in every], "token/s")
    y_factor, y_unit = axis_scale([p.figures[DEVICE_AXIS] for p in every], "token/s")
    series = []
    for name, points, kneed in lines:
        best = knee(points) if kneed else None
        series.append(LineSeries(
            name, [p.figures[USER_AXIS] / x_factor for p in points],
            [p.figures[DEVICE_AXIS] / y_factor for p in points],
            marked=[i for i, p in enumerate(points) if p is best],
            tips=[_tip(name, p) for p in points]))
    front = pareto(every)
    if len(front) > 1 and len(lines) > 1:
        series.append(LineSeries(FRONT, [p.figures[USER_AXIS] / x_factor for p in front],
                                 [p.figures[DEVICE_AXIS] / y_factor for p in front]))
    title = f"Throughput per device against speed per user{f', {model}' if model else ''}"
    return Lines(title, series, f"tokens per user ({x_unit})",
                 f"output tokens per device ({y_unit})",
                 caption=("Each point a load; up and to the right is better. Ring: the "
                          "highest load of the line that meets the SLO."
                          + (" Pareto front: the points no other beats on both axes."
                             if len(series) > len(lines) else "")),
                 marked_label=KNEE, site=True)


def _drawn(p: SweepPoint) -> bool:
    return all(isinstance(p.figures.get(n), int | float) and math.isfinite(p.figures[n])
               for n in (USER_AXIS, DEVICE_AXIS))


def _tip(name: str, p: SweepPoint) -> str:
    f = p.figures
    ttft = f.get(f"ttft_{SLO_PERCENTILE}")
    return (f"{name}, {p.label}: {format_value(f[USER_AXIS], 'token/s')} per user, "
            f"{format_value(f[DEVICE_AXIS], 'token/s')} per device, TTFT {SLO_PERCENTILE} "
            f"{MISSING if ttft is None else format_value(ttft, 's')}; "
            + ("meets the SLO" if p.meets_slo else "misses the SLO"))


def _title(m: Measurement) -> str:
    """The case as the results table names it: the parameters it shows (those left at a
    quiet default, such as timeouts, are not)."""
    if not m.case.shown:
        return m.case.label
    return " ".join([m.case.benchmark,
                     *(f"{k}={label_value(v)}" for k, v in m.case.shown_params)])

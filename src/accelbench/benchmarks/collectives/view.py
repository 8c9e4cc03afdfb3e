"""What collective sweeps add to a run's report: one line per sweep (`summary`), and the
bus bandwidth against message size."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from accelbench.benchmarks.collectives.summary import SweepSummary, summarize_sweep
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from accelbench.core.units import axis_scale, format_size, format_value
from accelbench.core.view import Lines, LineSeries, Section, Table

TITLE = "Collectives: peak bus bandwidth and small-message latency"
HEADER = ("Operation", "Ranks", "Library", "Sizes", "Peak busbw", "at", "Latency", "at")


def sweep_table(summaries: Sequence[SweepSummary]) -> Table | None:
    """The table of `summaries`, or None when there is none."""
    if not summaries:
        return None
    rows = []
    for s in summaries:
        dtype = s.dtype if s.op != "barrier" else ""
        what = " ".join(str(x) for x in (s.op, dtype, _variant(s)) if x)
        ranks = f"{s.world_size}" + (f" on {s.nodes} nodes" if (s.nodes or 1) > 1 else "")
        rows.append((
            what, ranks, s.library or s.backend or "-", _sizes(s),
            format_value(s.peak_busbw, "B/s"), format_size(s.peak_bytes),
            format_value(s.small_latency_s, "s"), format_size(s.small_bytes),
        ))
    return Table(TITLE, HEADER, rows, numeric=frozenset({1, 3, 4, 5, 6, 7}))


def collectives_table(measurements: Iterable[Measurement]) -> Table | None:
    """The table of the collective sweeps among `measurements`, or None when no
    collective case succeeded."""
    return sweep_table(summarize_sweep(measurements))


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    """The Collectives section: the sweeps' table and their bus bandwidth chart."""
    table = collectives_table(measurements)
    if table is None:
        return []
    # A barrier moves no data: it has a latency and no bus bandwidth, and stays in the
    # table alone.
    sized = [m for m in measurements if m.ok and m.figure("busbw") is not None
             and _is_size(m.case.param_dict.get("bytes"))]
    charts = (busbw_chart(sized),) if sized else ()
    return [Section("collectives", "Collectives", (table,), charts=charts)]


def busbw_chart(ms: Sequence[Measurement]) -> Lines:
    """Bus bandwidth against message size: one line per operation (and whatever else
    differs between the cases besides the size); a case with no bus bandwidth (a
    barrier) is left out."""
    from accelbench.analysis.generations import short_labels

    lines: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    representatives: dict[tuple[Any, ...], Case] = {}
    unit = "B/s"
    for m in ms:
        fig = m.figure("busbw")
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
        LineSeries(name, [x for x, _ in sorted(pts)], [y / factor for _, y in sorted(pts)])
        for name, pts in zip(names, lines.values(), strict=True)
    ]
    return Lines("Collective bus bandwidth against message size", series,
                 xlabel="message size", ylabel=f"bus bandwidth ({shown})", logx=True,
                 byte_ticks=True)


def _is_size(value: object) -> bool:
    """A message size a chart can place on its axis (a merged record may hold anything)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _sizes(s: SweepSummary) -> str:
    if s.op == "barrier":
        return "-"
    if s.sizes == 1:
        return format_size(s.min_bytes)
    return f"{format_size(s.min_bytes)}..{format_size(s.max_bytes)} ({s.sizes})"


def _variant(s: SweepSummary) -> str:
    parts = []
    if s.op in ("all-reduce", "reduce-scatter", "reduce") and s.reduce:
        parts.append(str(s.reduce))
    if s.inplace == "yes":
        parts.append("in-place")
    elif s.inplace == "no":
        parts.append("out-of-place")
    if s.warmup or s.iters:
        parts.append(f"w{s.warmup}/n{s.iters}")
    return " ".join(parts)

"""The collectives summary (`analysis.collectives`) as a table: one line per sweep."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelbench.analysis.collectives import SweepSummary, summarize_sweep
from accelbench.core.measurement import Measurement
from accelbench.report.tables import Table
from accelbench.report.units import format_size, format_value

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

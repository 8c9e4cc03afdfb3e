"""One line per swept operation: the peak bus bandwidth and the small-message latency.

Derived from stored measurements only (no torch), so `accelbench run` and
`accelbench show` print it alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from accelbench.benchmarks.collectives.sweep import format_size
from accelbench.core.measurement import Measurement

BENCHMARK = "collectives"
# A sweep is the cases that differ only in size.
_GROUP_KEYS = ("op", "dtype", "reduce", "inplace", "warmup", "iters", "world_size", "backend")


def summarize_sweep(measurements: Iterable[Measurement]) -> list[dict[str, Any]]:
    """Per sweep of the collectives benchmark (successful cases only), in first-seen order:
    sizes measured, the peak bus bandwidth and where it was reached, and the latency of
    the smallest size (time per operation)."""
    groups: dict[tuple[Any, ...], list[Measurement]] = {}
    for m in measurements:
        if m.case.benchmark != BENCHMARK or not m.ok:
            continue
        params = m.case.param_dict
        groups.setdefault(tuple(params.get(k) for k in _GROUP_KEYS), []).append(m)
    out = []
    for key, group in groups.items():
        by_size = sorted(group, key=_size)
        peak = max(by_size, key=lambda m: _value(m, "busbw") or 0.0)
        smallest = by_size[0]
        row = dict(zip(_GROUP_KEYS, key, strict=True))
        row.update(
            sizes=len(by_size),
            min_bytes=_size(by_size[0]),
            max_bytes=_size(by_size[-1]),
            peak_busbw=_value(peak, "busbw"),
            peak_bytes=_size(peak) if _value(peak, "busbw") is not None else None,
            small_bytes=_size(smallest),
            small_latency_s=_value(smallest, "time") or _value(smallest, "latency"),
            library=smallest.details.get("library"),
            nodes=smallest.details.get("nodes"),
        )
        out.append(row)
    return out


def _size(m: Measurement) -> int:
    """The size the case moved (rounded to whole elements), else the one it asked for."""
    return int(m.details.get("bytes", m.case.param_dict.get("bytes", 0)))


def _value(m: Measurement, name: str) -> float | None:
    figure = m.figure(name)
    return figure.value if figure is not None else None


def summary_table(measurements: Iterable[Measurement]) -> Any:
    """A rich table of `summarize_sweep`, or None when no collective case succeeded."""
    rows = summarize_sweep(measurements)
    if not rows:
        return None
    from rich.table import Table

    from accelbench.report.units import format_value

    table = Table(title="Collectives: peak bus bandwidth and small-message latency",
                  title_justify="left")
    for name in ("Operation", "Ranks", "Library", "Sizes", "Peak busbw", "at", "Latency", "at"):
        table.add_column(name, justify="left" if name in ("Operation", "Library") else "right")
    for r in rows:
        dtype = r["dtype"] if r["op"] != "barrier" else ""
        what = " ".join(str(x) for x in (r["op"], dtype, _variant(r)) if x)
        ranks = f"{r['world_size']}" + (f" on {r['nodes']} nodes" if (r["nodes"] or 1) > 1 else "")
        table.add_row(
            what, ranks, r["library"] or r["backend"] or "-",
            _sizes(r),
            format_value(r["peak_busbw"], "B/s"),
            format_size(r["peak_bytes"]) if r["peak_bytes"] is not None else "-",
            format_value(r["small_latency_s"], "s"),
            format_size(r["small_bytes"]),
        )
    return table


def _sizes(row: dict[str, Any]) -> str:
    if row["op"] == "barrier":
        return "-"
    if row["sizes"] == 1:
        return format_size(row["min_bytes"])
    return f"{format_size(row['min_bytes'])}..{format_size(row['max_bytes'])} ({row['sizes']})"


def _variant(row: dict[str, Any]) -> str:
    parts = []
    if row["op"] in ("all-reduce", "reduce-scatter", "reduce") and row["reduce"]:
        parts.append(row["reduce"])
    if row["inplace"] == "yes":
        parts.append("in-place")
    elif row["inplace"] == "no":
        parts.append("out-of-place")
    if row["warmup"] or row["iters"]:
        parts.append(f"w{row['warmup']}/n{row['iters']}")
    return " ".join(parts)

"""One summary per swept collective operation: the peak bus bandwidth and the
small-message latency.

Derived from stored measurements only (no torch), so `accelbench run` and
`accelbench show` print it alike (`report.collectives` writes it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.collectives.details import CollectiveDetails, size_bytes
from accelbench.core.measurement import Measurement

BENCHMARK = "collectives"
# A sweep is the cases that differ only in size.
_GROUP_KEYS = ("op", "dtype", "reduce", "inplace", "warmup", "iters", "world_size", "backend")


@dataclass(frozen=True)
class SweepSummary:
    """One sweep: what tells it apart from the others (`_GROUP_KEYS`), then its figures."""

    op: Any
    dtype: Any
    reduce: Any
    inplace: Any
    warmup: Any
    iters: Any
    world_size: Any
    backend: Any
    sizes: int  # how many sizes were measured
    min_bytes: int
    max_bytes: int
    peak_busbw: float | None  # B/s; None for an operation without a bus bandwidth
    peak_bytes: int | None  # the size the peak was reached at
    small_bytes: int  # the smallest size, whose time per operation is the latency
    small_latency_s: float | None
    library: str | None
    nodes: int | None


def summarize_sweep(measurements: Iterable[Measurement]) -> list[SweepSummary]:
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
        stored = _details(smallest)
        out.append(SweepSummary(
            **dict(zip(_GROUP_KEYS, key, strict=True)),
            sizes=len(by_size),
            min_bytes=_size(by_size[0]),
            max_bytes=_size(by_size[-1]),
            peak_busbw=_value(peak, "busbw"),
            peak_bytes=_size(peak) if _value(peak, "busbw") is not None else None,
            small_bytes=_size(smallest),
            small_latency_s=_value(smallest, "time") or _value(smallest, "latency"),
            library=stored.library,
            nodes=stored.nodes,
        ))
    return out


def _details(m: Measurement) -> CollectiveDetails:
    return CollectiveDetails.from_details(m.details)


def _size(m: Measurement) -> int:
    """The size the case moved (rounded to whole elements), else the one it asked for;
    0 when a (merged) record holds no usable size."""
    moved = _details(m).bytes
    return moved if moved is not None else size_bytes(m.case.param_dict.get("bytes", 0))


def _value(m: Measurement, name: str) -> float | None:
    figure = m.figure(name)
    return figure.value if figure is not None else None

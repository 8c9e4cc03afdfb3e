"""The views of the training-at-scale benchmarks.

- `table` and `chart`: the efficiency of scaling series (`scaling`), for `accelbench
  scaling` and for reports.
- `sections`: what a run's report adds, one row per case with its parallel form, token/s
  per device, MFU, the largest rank's peak memory beside the estimate, the exposed
  communication and the loss-parity check; and, where the run measured one
  configuration at several world sizes (the scaling suite), the efficiency table and
  chart over this run alone."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from accelbench.analysis.significance import RatioEstimate
from accelbench.benchmarks.scale.details import LossParity, ParallelForm, ScaleDetails
from accelbench.benchmarks.scale.scaling import (
    BASELINE,
    CONFIDENCE,
    IDEAL,
    RULE,
    Point,
    Scaling,
    Series,
    of_run,
)
from accelbench.core.measurement import Measurement
from accelbench.core.units import (
    format_bytes,
    format_factor,
    format_ratio,
    format_share,
    format_value,
)
from accelbench.core.view import BAD, Lines, LineSeries, Section, Table

TITLE = "Training at scale"
HEADER = ("Case", "Form", "Ranks", "token/s per device", "MFU", "Peak memory (estimate)",
          "Exposed comm.", "Loss parity")
ABOUT = ("Each case trained its parallel form against one device first (loss parity: the "
         "worst relative difference of the checked steps, against its tolerance); memory is "
         "the largest rank's peak beside the per-rank estimate it was planned with; exposed "
         "communication is the share of profiled steps in communication with no compute "
         "beside it (rank 0's).")


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    from accelbench.analysis.generations import short_labels

    ran = [m for m in measurements if m.ok]
    if not ran:
        return []
    labels = short_labels([m.case for m in ran], dtype=True)
    rows = [_row(label, m) for label, m in zip(labels, ran, strict=True)]
    notes = []
    if any("RSS" in _details(m).peak_memory_source for m in ran):
        notes.append("On the CPU the peak is the process's resident memory, the interpreter "
                     "and its libraries included; the estimate counts the training state "
                     "alone.")
    tables = [Table("Each case", HEADER, rows, notes=notes,
                    numeric=frozenset({2, 3, 4, 5, 6}))]
    charts: tuple[Any, ...] = ()
    series = of_run("this run", "", ran)
    if any(len(s.points) > 1 for s in series.series):
        tables.append(table(series))
        charts = (chart(series),)
    return [Section("scale", TITLE, tuple(tables), about=ABOUT, charts=charts)]


def _details(m: Measurement) -> ScaleDetails:
    return ScaleDetails.from_details(m.details)


def _row(label: str, m: Measurement) -> tuple[str, ...]:
    details = _details(m)
    return (label, _form(details.parallel), _ranks(details),
            _figure(m, "tokens_per_device"), _figure(m, "mfu"), _memory(m, details),
            _figure(m, "exposed_comm"), _parity(details.parity, details.layers))


def _form(parallel: ParallelForm | Mapping[str, object] | None) -> str:
    if isinstance(parallel, Mapping):  # a point's, as the scaling series keeps it
        parallel = ParallelForm.from_dict(parallel)
    if parallel is None:
        return "-"
    form = parallel.form if parallel.form is not None else "-"
    sizes = " ".join(f"{k}={v}" for k, v in (("dp", parallel.dp), ("tp", parallel.tp),
                                              ("pp", parallel.pp))
                     if v is not None and v > 1)
    extra = ""
    if parallel.schedule and form == "pp":
        extra = (f" {parallel.schedule} x"
                 f"{parallel.microbatches if parallel.microbatches is not None else '?'}")
    if parallel.accumulate is not None and parallel.accumulate > 1:
        extra += f" accumulate {parallel.accumulate}"
    return " ".join(x for x in (form, sizes) if x) + extra


def _ranks(details: ScaleDetails) -> str:
    world, nodes = details.world_size, details.nodes
    if world is None:
        return "-"
    return f"{world}" + (f" on {nodes} nodes" if nodes is not None and nodes > 1 else "")


def _figure(m: Measurement, name: str) -> str:
    figure = m.figure(name)
    return format_value(figure.value, figure.unit) if figure is not None else "-"


def _memory(m: Measurement, details: ScaleDetails) -> str:
    peak = m.figure("peak_memory")
    total = details.estimated_total
    shown = format_bytes(peak.value) if peak is not None else "-"
    return f"{shown} ({format_bytes(total)})" if total is not None else shown


def _parity(parity: LossParity | None, layers: int | None) -> str:
    if parity is None:
        return "-"
    worst, tolerance = parity.worst_relative_difference, parity.tolerance
    if worst is None or tolerance is None:
        return "-"
    fewer = parity.reference_layers
    shrunk = fewer is not None and layers is not None and fewer != layers
    note = f", on {fewer} of {layers} blocks" if shrunk else ""
    steps = parity.steps if parity.steps is not None else "?"
    return f"{worst:.1e} <= {tolerance:g} ({steps} steps{note})"


# -- the scaling series ------------------------------------------------------------------


TABLE_HEADER = ("Configuration", "Scaling", "Ranks", "Nodes", "Ranks/node", "Parallel",
                "Throughput", "Speed-up", "Efficiency", "Lost", "Drags")


def table(result: Scaling) -> Table:
    """One row per point of every series, smallest world size first."""
    rows, styles = [], []
    notes = [
        f"Efficiency: throughput at N ranks / (N / N0 x throughput at N0), N0 the series' "
        f"smallest world size; speed-up: throughput(N) / throughput(N0); lost: 1 - "
        f"efficiency, the share of the ideal throughput lost; [brackets]: {CONFIDENCE:.0%} "
        f"CI of the ratio from the values each worker process measured (Welch's t on their "
        f"logarithms; with one value a side, from the two figures' stated intervals). "
        f"Newest measurement per world size.",
        f"Drags: {RULE}.",
    ]
    for s in result.series:
        for p in s.points:
            e = p.efficiency
            throughput = format_value(p.value, s.unit)
            if p.contended:
                throughput += " (contended)"
            if p.throttled:
                throughput += " (throttled)"
            baseline = e is not None and e.method == BASELINE
            rows.append((
                s.label, p.scaling, str(p.world_size), str(p.nodes), p.ranks_text,
                _form(p.parallel), throughput,
                format_factor(p.speedup.ratio) if p.speedup else "-",
                "1 (baseline)" if baseline else format_ratio(e.ratio, e.low, e.high) if e
                else "-",
                "-" if baseline else format_share(p.lost),
                "; ".join([*(d.describe() for d in p.drags), *p.isolated])
                or ("see notes" if p.notes else "none"),
            ))
            styles.append(BAD if p.drags or p.isolated else None)
            notes += [f"{s.label}, {p.world_size} ranks: {n}." for n in p.notes]
        notes += [f"{s.label}: {n}." for n in s.notes]
    notes += [f"{n}." for n in result.notes]
    return Table("Scaling efficiency", TABLE_HEADER, rows, notes,
                 frozenset({2, 3, 6, 7, 8, 9}), styles)


def chart(result: Scaling) -> Lines:
    """Efficiency against ranks (log2 axis): one line per series, its interval as a band,
    each point's figures as its hover text, and the ideal at 1."""
    lines = []
    sizes = []
    for s in result.series:
        points = [p for p in s.points if p.efficiency is not None]
        if not points:
            continue
        sizes += [p.world_size for p in points]
        y = [p.efficiency.ratio for p in points if p.efficiency is not None]
        band = [_band(p.efficiency) for p in points if p.efficiency is not None]
        lines.append(LineSeries(s.label, [float(p.world_size) for p in points], y, band=band,
                                tips=[_tip(s, p) for p in points]))
    if sizes:
        lines.append(LineSeries(IDEAL, [float(min(sizes)), float(max(sizes))], [1.0, 1.0]))
    return Lines("Scaling efficiency against ranks", lines, xlabel="ranks (world size)",
                 ylabel="efficiency (1: ideal)",
                 caption=f"Throughput at N ranks over N/N0 times the throughput at the "
                 f"smallest world size N0. Bands: {CONFIDENCE:.0%} CI of that ratio.",
                 logx=True)


def _band(e: RatioEstimate) -> tuple[float, float]:
    """The interval, or the point itself where it has none (an unbounded end)."""
    if math.isfinite(e.low) and math.isfinite(e.high) and e.low > 0:
        return e.low, e.high
    return e.ratio, e.ratio


def _tip(s: Series, p: Point) -> str:
    e = p.efficiency
    assert e is not None
    interval = (f" [{e.low:.3f}, {e.high:.3f}]" if math.isfinite(e.low) and math.isfinite(e.high)
                else " (no interval)")
    lines = [f"{s.label}: {p.world_size} ranks on {p.nodes} node(s), {p.scaling} scaling",
             f"efficiency {e.ratio:.3f}{interval}",
             f"speed-up {format_factor(p.speedup.ratio if p.speedup else None)}, "
             f"{format_value(p.value, s.unit)}"]
    lines += [d.describe() for d in p.drags]
    lines += list(p.isolated)
    return "\n".join(lines)

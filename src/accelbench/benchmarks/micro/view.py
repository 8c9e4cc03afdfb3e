"""What micro-benchmarks add to a run's report: beside their rows in the Results tables,
a chart per benchmark and unit of how close each case came to the device's published
peak. A case's label is its parameters, with the note a benchmark put in its details
under LABEL_NOTE for what the parameters cannot say (unified-memory: managed memory that
stayed in host memory is "host-resident", whatever its `memory` parameter reads)."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.core.measurement import Measurement
from accelbench.core.units import axis_scale, format_params
from accelbench.core.view import RESULTS, Bars, BarSeries, Section

LABEL_NOTE = "label_note"  # details key: a short note shown after the case's chart label


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    """A chart per benchmark and unit, added to the Results section."""
    groups: dict[tuple[str, str], list[Measurement]] = {}
    for m in measurements:
        if m.ok and m.primary is not None:
            groups.setdefault((m.case.benchmark, m.primary.unit), []).append(m)
    charts = tuple(peak_chart(bench, unit, ms) for (bench, unit), ms in groups.items())
    return [Section(RESULTS, "Results", charts=charts)] if charts else []


def peak_chart(bench: str, unit: str, ms: Sequence[Measurement]) -> Bars:
    """% of the published peak per case; the figure itself where a peak is not known."""
    from accelbench.analysis.generations import short_labels
    from accelbench.analysis.values import value_ci

    labels = short_labels([m.case for m in ms], dtype=True)
    labels = [format_params(m.case.params) if label == bench else label
              for label, m in zip(labels, ms, strict=True)]
    labels = [f"{label} ({m.details[LABEL_NOTE]})" if m.details.get(LABEL_NOTE) else label
              for label, m in zip(labels, ms, strict=True)]
    peaks = [m.primary.peak if m.primary else None for m in ms]
    stats = [value_ci(m) for m in ms]
    if all(peaks):
        scales = [100.0 / p for p in peaks if p]
        ylabel, title = "% of peak", f"{bench}: % of the published peak"
    else:
        factor, shown = axis_scale([v for v, _, _ in stats], unit)
        scales = [1.0 / factor] * len(ms)
        ylabel, title = shown, f"{bench} ({shown}; no published peak for this device)"
    values: list[float | None] = [v * k for (v, _, _), k in zip(stats, scales, strict=True)]
    errors: list[tuple[float, float] | None] = [
        (lo * k, hi * k) for (_, lo, hi), k in zip(stats, scales, strict=True)]
    marked = [i for i, m in enumerate(ms) if m.contended or m.throttled]
    return Bars(title, labels, [BarSeries(bench, values, errors, marked)], ylabel=ylabel,
                caption="Bars: median; whiskers: 95% CI of the median; ring: measured on a "
                "busy host or a throttled device.", marked_label="busy host or throttled")

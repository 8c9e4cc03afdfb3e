"""What whole-model benchmarks add to a run's report: beside their rows in the Results
tables, a chart per mode (training, inference) of each model's throughput per
precision."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.core.measurement import Measurement
from accelbench.core.units import axis_scale
from accelbench.core.view import RESULTS, Bars, BarSeries, Section


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    """A throughput chart per mode, added to the Results section."""
    from accelbench.analysis.values import case_mode

    models = [m for m in measurements
              if m.ok and m.primary is not None and m.primary.higher_is_better]
    charts = []
    for mode in dict.fromkeys(case_mode(m.case) for m in models):
        charts.append(throughput_chart(mode or "",
                                       [m for m in models if case_mode(m.case) == mode]))
    return [Section(RESULTS, "Results", charts=tuple(charts))] if charts else []


def throughput_chart(mode: str, ms: Sequence[Measurement]) -> Bars:
    """One group of bars per model, one bar per precision: the median throughput."""
    from accelbench.analysis.generations import short_labels
    from accelbench.analysis.values import value_ci

    labels = short_labels([m.case for m in ms])
    categories = list(dict.fromkeys(labels))
    dtypes = list(dict.fromkeys(str(m.case.dtype) for m in ms))
    unit = ms[0].primary.unit if ms[0].primary else ""
    stats = {(label, str(m.case.dtype)): value_ci(m)
             for label, m in zip(labels, ms, strict=True)}
    doubtful = {(label, str(m.case.dtype)) for label, m in zip(labels, ms, strict=True)
                if m.contended or m.throttled}
    factor, shown = axis_scale([v for v, _, _ in stats.values()], unit)
    series = []
    for dtype in dtypes:
        cells = [stats.get((c, dtype)) for c in categories]
        series.append(BarSeries(
            dtype, [s[0] / factor if s else None for s in cells],
            [(s[1] / factor, s[2] / factor) if s else None for s in cells],
            [i for i, c in enumerate(categories) if (c, dtype) in doubtful]))
    name = {"train": "Training", "infer": "Inference"}.get(mode, mode or "Model")
    return Bars(f"{name} throughput per model and precision", categories, series,
                ylabel=shown, caption="Bars: median; whiskers: 95% CI of the median; ring: "
                "measured on a busy host or a throttled device.",
                marked_label="busy host or throttled")

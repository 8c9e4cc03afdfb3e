"""What inference engines add to a run's report (from `groups`): per model, precision
and batch, each engine's latency, throughput, time to get ready, throughput over eager's
and output parity; and a chart of those ratios.

The ratio is of throughput (time per timed call, a window of calls), never of latency:
the p50 latency beside it is of single synchronised calls and can rank two engines the
other way (an int8 engine whose quantise step costs each call more than it saves at
batch 1), so the column names the figure it is over."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from accelbench.benchmarks.models.engines.groups import EngineGroup, EngineRow, engine_groups
from accelbench.core.measurement import Measurement
from accelbench.core.units import format_factor, format_params, format_value
from accelbench.core.view import BAD, WARN, Bars, BarSeries, Section, Table

HEADER = ("Engine", "Status", "Latency p50", "Throughput", "Ready in", "Throughput over eager",
          "Parity (max rel, cosine, top-1)", "Tolerance", "Providers")
NOTE = ("Throughput over eager: eager's time per timed call over the engine's (the ratio "
        "of their throughputs), in the same run, with the 95% interval of the ratio of "
        "medians; the p50 latency, of single calls, is measured apart and may rank the "
        "engines otherwise. Parity: against eager fp32 on the same device, "
        "same weights and batch; max rel is the largest error over the output's largest "
        "magnitude. A case out of tolerance fails with its figures and is not timed.")


def engines_tables(measurements: Iterable[Measurement]) -> list[Table]:
    """One table per group; the note on how to read them under the last."""
    tables = [group_table(g) for g in engine_groups(measurements)]
    if tables:
        tables[-1] = replace(tables[-1], notes=[NOTE])
    return tables


def group_title(g: EngineGroup) -> str:
    return f"Engines: {g.benchmark} {format_params(g.shown)} on {g.device}"


def group_table(g: EngineGroup) -> Table:
    rows, styles = [], []
    for r in g.rows:
        rows.append(_cells(r))
        m = r.measurement
        styles.append(None if m.ok and not m.warnings else WARN if m.ok else BAD)
    return Table(group_title(g), HEADER, rows,
                 numeric=frozenset({2, 3, 4, 5}), styles=styles)


def _cells(r: EngineRow) -> tuple[str, ...]:
    m = r.measurement
    latency = m.figure("p50") or m.figure("ttft")
    rate = m.primary if m.primary and m.primary.higher_is_better else None
    ready = m.figure("compile_time")
    status = m.status if m.ok else f"{m.status}: {m.reason or ''}"
    return (
        r.engine, status,
        format_value(latency.value if latency else None, "s"),
        format_value(rate.value if rate else None, rate.unit if rate else ""),
        format_value(ready.value if ready else None, "s"),
        _speedup(r), _parity(r.parity), _tolerance(r.parity),
        node_counts(m.details.get("engine_details")) or r.providers or "-",
    )


def node_counts(details: Any) -> str | None:
    """How many nodes each ONNX Runtime provider ran, where the record counts them (a
    node left on the CPU shows here, beside the GPU provider's)."""
    nodes = details.get("nodes_per_provider") if isinstance(details, dict) else None
    if not isinstance(nodes, dict) or not nodes:
        return None
    return ", ".join(f"{p} {n}" for p, n in nodes.items()) + " nodes"


def _speedup(r: EngineRow) -> str:
    s = r.speedup
    if s is None:
        return "1.00x (reference)" if r.engine == "eager" and r.measurement.ok else "-"
    text = format_factor(s.ratio)
    if math.isfinite(s.low) and math.isfinite(s.high):
        text += f" [{s.low:.2f}, {s.high:.2f}]"
    return text


def _parity(p: dict[str, Any] | None) -> str:
    if not p:
        return "-"
    parts = [_num(p.get("max_rel"), ".2g"), _num(p.get("cosine"), ".6f")]
    if p.get("top1") is not None:
        parts.append(_num(p.get("top1"), ".1%"))
    return ", ".join(parts)


def _tolerance(p: dict[str, Any] | None) -> str:
    tol = p.get("tolerance") if p else None
    if not isinstance(tol, dict):
        return "-"
    return (f"<= {_num(tol.get('max_rel'), 'g')}, >= {_num(tol.get('cosine'), 'g')}, "
            f">= {_num(tol.get('top1'), '.0%')}")


def _num(value: Any, spec: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value) if value is not None else "-"
    return format(value, spec)


def speedup_series(g: EngineGroup) -> tuple[list[str], list[float | None],
                                            list[tuple[float, float] | None]]:
    """Labels, speed-ups and their intervals of a group's engines (eager is 1)."""
    labels: list[str] = []
    values: list[float | None] = []
    errors: list[tuple[float, float] | None] = []
    for r in g.rows:
        labels.append(r.engine)
        s = r.speedup
        if s is not None:
            values.append(s.ratio)
            errors.append((s.low, s.high))
        elif r.engine == "eager" and r.measurement.ok:
            values.append(1.0)
            errors.append(None)
        else:
            values.append(None)
            errors.append(None)
    return labels, values, errors


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    """The Engines section: a table per group and, where two engines or more ran, their
    speed-ups over eager."""
    tables = engines_tables(measurements)
    if not tables:
        return []
    charts = tuple(speedup_chart(g) for g in engine_groups(measurements)
                   if sum(r.measurement.ok for r in g.rows) > 1)
    return [Section("engines", "Engines", tuple(tables), charts=charts)]


def speedup_chart(g: EngineGroup) -> Bars:
    """Each engine's throughput over eager's in one group (model, precision, batch)."""
    labels, values, errors = speedup_series(g)
    return Bars(f"Throughput over eager: {group_title(g).removeprefix('Engines: ')}", labels,
                [BarSeries("throughput over eager", values, errors, untrusted_ratios(g))],
                ylabel="throughput over eager (x)",
                caption="Above 1: more throughput than eager. Whiskers: 95% CI of the ratio. "
                "Missing bars: the engine failed or was skipped. Ringed: the engine or eager "
                "was measured on a busy host or a throttled device.",
                reference=1.0, horizontal=True, marked_label="busy host or throttled")


def untrusted_ratios(g: EngineGroup) -> list[int]:
    """The bars of a group's chart whose ratio rests on a figure measured on a busy host
    or a throttled device: the engine's own, or eager's (which every ratio is over)."""
    def busy(m: Measurement) -> bool:
        return m.ok and (m.contended or m.throttled)

    eager = any(busy(r.measurement) for r in g.rows if r.engine == "eager")
    return [i for i, r in enumerate(g.rows) if r.measurement.ok
            and (eager or busy(r.measurement))]

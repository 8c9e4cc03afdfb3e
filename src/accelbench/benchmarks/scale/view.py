"""What the training-at-scale benchmarks add to a run's report: one row per case with its
parallel form, token/s per device, MFU, the largest rank's peak memory beside the
estimate, the exposed communication and the loss-parity check; and, where the run
measured one configuration at several world sizes (the scaling suite), the efficiency
table and chart `accelbench scaling` gives, over this run alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from accelbench.core.measurement import Measurement
from accelbench.core.units import format_bytes, format_value
from accelbench.core.view import Section, Table

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
    from accelbench.benchmarks.scale import scaling

    ran = [m for m in measurements if m.ok]
    if not ran:
        return []
    labels = short_labels([m.case for m in ran], dtype=True)
    rows = [_row(label, m) for label, m in zip(labels, ran, strict=True)]
    notes = []
    if any("RSS" in str(m.details.get("peak_memory_source", "")) for m in ran):
        notes.append("On the CPU the peak is the process's resident memory, the interpreter "
                     "and its libraries included; the estimate counts the training state "
                     "alone.")
    tables = [Table("Each case", HEADER, rows, notes=notes,
                    numeric=frozenset({2, 3, 4, 5, 6}))]
    charts: tuple[Any, ...] = ()
    series = scaling.of_run("this run", "", ran)
    if any(len(s.points) > 1 for s in series.series):
        tables.append(scaling.table(series))
        charts = (scaling.chart(series),)
    return [Section("scale", TITLE, tuple(tables), about=ABOUT, charts=charts)]


def _row(label: str, m: Measurement) -> tuple[str, ...]:
    details = m.details
    return (label, _form(details.get("parallel")), _ranks(details),
            _figure(m, "tokens_per_device"), _figure(m, "mfu"), _memory(m),
            _figure(m, "exposed_comm"), _parity(details.get("parity"), details.get("layers")))


def _form(parallel: object) -> str:
    if not isinstance(parallel, Mapping):
        return "-"
    form = str(parallel.get("form", "-"))
    sizes = " ".join(f"{k}={parallel[k]}" for k in ("dp", "tp", "pp")
                     if isinstance(parallel.get(k), int) and parallel[k] > 1)
    extra = ""
    if parallel.get("schedule") and form == "pp":
        extra = f" {parallel['schedule']} x{parallel.get('microbatches', '?')}"
    if isinstance(parallel.get("accumulate"), int) and parallel["accumulate"] > 1:
        extra += f" accumulate {parallel['accumulate']}"
    return " ".join(x for x in (form, sizes) if x) + extra


def _ranks(details: Mapping[str, Any]) -> str:
    world, nodes = details.get("world_size"), details.get("nodes")
    if not isinstance(world, int):
        return "-"
    return f"{world}" + (f" on {nodes} nodes" if isinstance(nodes, int) and nodes > 1 else "")


def _figure(m: Measurement, name: str) -> str:
    figure = m.figure(name)
    return format_value(figure.value, figure.unit) if figure is not None else "-"


def _memory(m: Measurement) -> str:
    peak = m.figure("peak_memory")
    estimate = m.details.get("memory_estimate")
    total = estimate.get("total") if isinstance(estimate, Mapping) else None
    shown = format_bytes(peak.value) if peak is not None else "-"
    return f"{shown} ({format_bytes(total)})" if isinstance(total, (int, float)) else shown


def _parity(parity: object, layers: object) -> str:
    if not isinstance(parity, Mapping):
        return "-"
    worst, tolerance = parity.get("worst_relative_difference"), parity.get("tolerance")
    if not isinstance(worst, (int, float)) or not isinstance(tolerance, (int, float)):
        return "-"
    fewer = parity.get("reference_layers")
    shrunk = isinstance(fewer, int) and isinstance(layers, int) and fewer != layers
    note = f", on {fewer} of {layers} blocks" if shrunk else ""
    return f"{worst:.1e} <= {tolerance:g} ({parity.get('steps', '?')} steps{note})"


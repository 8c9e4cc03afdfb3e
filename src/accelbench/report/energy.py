"""What the telemetry beside each case says, for people: the energy table of a run (power,
energy per call, work per joule, clocks, throttling, the energy counter's check) and the
power-and-clock series a chart draws.

Every figure is the measurement's own (`Measurement.energy`, its derived figures): nothing
is recomputed here. Text from the sources (their names, why one was not used, the names of
throttle reasons) is stored text: each renderer escapes it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accelbench.core.energy import Energy
from accelbench.core.measurement import Measurement
from accelbench.core.telemetry import GFX_CLOCK_MHZ, POWER_W, Series
from accelbench.core.units import MISSING, format_share, format_value
from accelbench.core.view import WARN, Panel, Section, Table, TimeSeries
from accelbench.report.results import shown_params

TITLE = "Energy"
COLUMNS = ("Case", "Mean power", "Peak power", "Energy per call", "Work per joule",
           "Clock min", "Clock median", "Throttled", "Counter check")
NUMERIC = frozenset({1, 2, 3, 4, 5, 6})
ABOUT = ("Over the timed part of each case, from the telemetry sampled beside it, over "
         "all its processes. Work per joule is the headline rate's work over the energy. "
         "Counter check: how far the device's energy counter is from the integral of the "
         "sampled power; a suspect counter is not used, and power read as an average "
         "over a window too short to compare leaves it unchecked. Power and energy that "
         "a device reads only for a package it shares (a GCD of an MI250X, a compute "
         "partition, a MIG instance) are shown as the package's and give no energy per "
         "call. Throttled: a throttle reason was reported, or the GFX clock sagged well "
         "below its peak; such figures are below what the device does unthrottled.")


def energy_section(measurements: Sequence[Measurement]) -> Section | None:
    """The Energy section: the table, and each case's power and clock over time."""
    table = energy_table(measurements)
    if table is None:
        return None
    charts = tuple(c for m in measurements if has_telemetry(m)
                   for c in [power_clock_chart(m)] if c is not None)
    return Section("energy", TITLE, (table,), ABOUT, charts=charts)


def power_clock_chart(m: Measurement) -> TimeSeries | None:
    """Power and GFX clock over the case, from its first process's series, the timed
    window shaded; None when that series has neither."""
    shown = trace(m)
    if shown is None:
        return None
    which = (f"process 1 of {shown.processes}" if shown.processes > 1
             else "its one process")
    caption = f"From the series of {which}."
    if shown.window is not None:
        caption += " Shaded: the timed part."
    panels = [Panel("power (W)", shown.power_w, from_zero=True),
              Panel("GFX clock (MHz)", shown.clock_mhz, color="#c05020")]
    return TimeSeries(f"Power and clock: {case_label(m)}", shown.t, panels,
                      xlabel="time (s)", caption=caption, window=shown.window,
                      window_label="timed")


def has_telemetry(m: Measurement) -> bool:
    """A measured case whose telemetry read something a row or a chart shows: power,
    energy, a clock or a throttle state. Host-only readings in a VM (no RAPL, no GPU)
    make none, and an all-empty table on every CPU run would say nothing; what was
    missing and why stays in the record."""
    if not (m.ok and m.telemetry):
        return False
    energy = m.energy
    return energy is not None and any(
        value is not None for value in (energy.mean_power_w, energy.energy_j,
                                        energy.package_power_w, energy.cpu_mean_power_w,
                                        energy.clock_median_mhz, energy.throttled))


def case_label(m: Measurement) -> str:
    params = shown_params(m.case)
    return f"{m.case.benchmark} {params}" if params else m.case.benchmark


def energy_table(measurements: Iterable[Measurement]) -> Table | None:
    """The energy table of a run's cases with telemetry; None when no case has any."""
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    notes: list[str] = []
    for m in measurements:
        if not has_telemetry(m):
            continue
        energy = m.energy
        label = case_label(m)
        rows.append((label, *_cells(m, energy)))
        throttled = m.throttled
        suspect = bool(energy is not None and energy.counter_suspect)
        styles.append(WARN if throttled or suspect else None)
        notes.append(f"{label}: {sources_note(m.series, energy)}")
    if not rows:
        return None
    return Table(TITLE, COLUMNS, rows, notes=notes, numeric=NUMERIC, styles=styles)


def _cells(m: Measurement, energy: Energy | None) -> tuple[str, ...]:
    power = m.figure("power")
    mean_power = power.value if power is not None else (
        energy.mean_power_w if energy is not None else None)
    per_call = m.figure("energy_per_call")
    rate = m.rates[0].name if m.rates else None
    work = m.figure(f"{rate}_per_joule") if rate else None
    if energy is None:
        peak = clock_min = clock_median = None
    else:
        peak, clock_min = energy.peak_power_w, energy.clock_min_mhz
        clock_median = energy.clock_median_mhz
    shown_power = format_value(mean_power, power.unit if power is not None else "W")
    if mean_power is None and energy is not None and energy.package_power_w is not None:
        shown_power = f"{format_value(energy.package_power_w, 'W')} (package)"
    return (
        shown_power,
        format_value(peak, "W"),
        format_value(per_call.value, per_call.unit) if per_call is not None else MISSING,
        format_value(work.value, work.unit) if work is not None else MISSING,
        _mhz(clock_min),
        _mhz(clock_median),
        throttled_cell(m, energy),
        counter_cell(energy),
    )


def _mhz(value: float | None) -> str:
    return MISSING if value is None or not math.isfinite(value) else f"{value:.0f} MHz"


def throttled_cell(m: Measurement, energy: Energy | None) -> str:
    """"yes: <reasons>", "no", or "-" where nothing could tell (no clock, no bits)."""
    if m.throttled:
        reasons = energy.throttle_reasons if energy is not None else ()
        return f"yes: {'; '.join(reasons)}" if reasons else "yes"
    if energy is None or energy.throttled is None:
        return MISSING
    return "no"


def counter_cell(energy: Energy | None) -> str:
    """The energy counter's distance from the integrated power; "suspect" beyond the
    limit (the integral is used then), "unchecked" where averaged power readings could
    not check it over so short a window; "-" where the two could not both be had."""
    if energy is None or energy.disagreement is None:
        return MISSING
    shown = format_share(energy.disagreement)
    if energy.counter_suspect is None:
        return f"{shown} unchecked"
    return f"{shown} suspect" if energy.counter_suspect else f"{shown} ok"


def sources_note(series: Sequence[Series], energy: Energy | None) -> str:
    """Which sources answered and, once each, what was missing and why, with the
    summary's other notes (sampling stopped, counter wraps)."""
    sources = list(dict.fromkeys(src for s in series for src in s.sources))
    parts = [f"sources {', '.join(sources)}" if sources else "no source answered"]
    seen = set()
    for s in series:
        for source, why in s.missing.items():
            part = f"{source} not used: {why}"
            if part not in seen:
                seen.add(part)
                parts.append(part)
    for note in energy.notes if energy is not None else ():
        if note not in seen:
            seen.add(note)
            parts.append(note)
    return "; ".join(parts)


@dataclass(frozen=True)
class Trace:
    """The power and GFX clock of one process over time, for a chart."""

    t: tuple[float, ...]
    power_w: tuple[float | None, ...]
    clock_mhz: tuple[float | None, ...]
    window: tuple[float, float] | None
    process: int  # 1-based: which process's series
    processes: int


def trace(m: Measurement) -> Trace | None:
    """The first process's power and clock, or None when it has neither."""
    series = m.series
    if not series:
        return None
    first = series[0]
    power, clock = first.channel(POWER_W), first.channel(GFX_CLOCK_MHZ)
    if not any(_finite(v) for v in (*power, *clock)):
        return None
    return Trace(first.t, power, clock, first.window, 1, len(series))


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)

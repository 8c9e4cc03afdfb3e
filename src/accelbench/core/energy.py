"""Energy, power, clocks and throttling over a case's timed window, from its Series.

Two estimates of device energy are computed and compared. The device's own energy counter
integrates power at the firmware's rate (kHz), far finer than any sampling from Python,
so it is preferred; but counters misreport on some parts (amdsmi's energy count is known
to be off on several AMD Instinct generations), so it is checked against the trapezoid
integral of the sampled power and replaced by that integral when the two disagree.

Power read as an average lags the power it averages. The integral over a window W of a
reading averaged over A seconds misses what was drawn in the last A/2 to A seconds and
counts as much from before the window instead: up to about A times the power, at each
end, however finely it is sampled. So the tolerance is widened by A x peak / (W x mean),
that lag as a share of the window's energy; where that share alone exceeds
LAG_CHECK_LIMIT the window is too short for the two to say anything of each other, and
the counter is used unchecked (`counter_suspect` None, with a note). A of each reading is
in the series' POWER_AVG_S channel (none recorded: instantaneous, as format-1 series
were read).

Readings of a package that several devices share (the two GCDs of an MI250X, which
report their package's power and energy on one GCD; the compute partitions of an MI300X;
the MIG instances of a GPU) are not the device's: their figures go to `package_power_w`
and `package_energy_j`, with the devices in `package_devices`, and the device's own
figures (mean and peak power, energy) stay None, so nothing derived per device (energy
per call, work per joule) counts the package's energy once for each of its devices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from accelbench.core.telemetry import (
    CPU_ENERGY_J,
    ENERGY_J,
    GFX_CLOCK_MHZ,
    POWER_AVG_S,
    POWER_W,
    THROTTLE,
    Series,
)

# Beyond this relative difference between the energy counter and the integrated power,
# the counter is not trusted. Board power sensors are specified to about ±5% (NVIDIA
# documents ±5% for power draw on data-centre parts), and a 0.1 s sampling of a load
# whose power swings with each kernel adds a few percent more to the integral; counters
# and integrals of a sound device agree well within 10%, so a larger gap means one of
# them is wrong, and the counter is the one known to misreport.
ENERGY_DISAGREEMENT = 0.10

# Beyond this share of the window's energy, the lag of averaged power readings alone could
# explain any disagreement: the counter is not checked against them (a 1 s average in a
# window shorter than about 2 s).
LAG_CHECK_LIMIT = 0.5

# The GFX clock falling more than this fraction below the window's own peak counts as
# throttling even when no throttle bit says so: boost clocks wander by a few percent under
# steady load, while power or thermal capping pulls them down by 10-30%.
CLOCK_SAG_FRACTION = 0.10


@dataclass(frozen=True)
class Energy:
    """Derived figures of one window; None where the series lacks what a figure needs.

    Device and CPU are kept apart: `energy_j` is the device's, `cpu_energy_j` the CPU
    packages' (RAPL), never substituted for each other.
    """

    duration_s: float | None = None
    mean_power_w: float | None = None
    peak_power_w: float | None = None
    energy_counter_j: float | None = None
    energy_integral_j: float | None = None
    energy_j: float | None = None
    disagreement: float | None = None
    counter_suspect: bool | None = None
    clock_min_mhz: float | None = None
    clock_median_mhz: float | None = None
    throttled: bool | None = None
    throttle_reasons: tuple[str, ...] = ()
    cpu_energy_j: float | None = None
    cpu_mean_power_w: float | None = None
    notes: tuple[str, ...] = ()
    power_averaging_s: float | None = None  # the longest averaging of a power reading used
    tolerance: float | None = None  # the counter check's limit, widened for that averaging
    package_power_w: float | None = None  # mean power of the package the device shares
    package_energy_j: float | None = None
    package_devices: tuple[str, ...] = ()  # the devices that share that package

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = asdict(self)
        for name in _STRING_LISTS:
            data[name] = list(getattr(self, name))
        return data

    @classmethod
    def from_dict(cls, data: object) -> Energy:
        """The figures `to_dict` wrote; TypeError on a value of the wrong kind. A summary
        written before the package figures lacks their keys: they read as absent."""
        if not isinstance(data, Mapping):
            raise TypeError(f"an energy summary is a dict, not {type(data).__name__}")
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if f.name == "package_devices" and f.name not in data:
                continue
            if f.name in _STRING_LISTS:
                if not isinstance(value, (list, tuple)) or not all(
                    isinstance(v, str) for v in value
                ):
                    raise TypeError(f"energy summary {f.name}: expected a list of strings")
                values[f.name] = tuple(value)
            elif f.name in ("counter_suspect", "throttled"):
                if value is not None and not isinstance(value, bool):
                    raise TypeError(f"energy summary {f.name}: expected true, false or null")
                values[f.name] = value
            elif value is not None:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TypeError(f"energy summary {f.name}: expected a number")
                values[f.name] = float(value)
        return cls(**values)


_STRING_LISTS = ("throttle_reasons", "notes", "package_devices")


@dataclass(frozen=True)
class _Counter:
    total_j: float
    span_s: float
    backwards: int  # decreases with no known wrap: those sample pairs were dropped
    wraps: int


def _window_indices(series: Series) -> range:
    """The samples inside series.window (inclusive), else all of them."""
    times = series.t
    if series.window is None:
        return range(len(times))
    start, end = series.window
    first = next((i for i, x in enumerate(times) if x >= start), len(times))
    last = first
    while last < len(times) and times[last] <= end:
        last += 1
    return range(first, last)


def _counter(
    times: Sequence[float], values: Sequence[float | None], wrap: float | None
) -> _Counter | None:
    """The counter's increase over consecutive readings, a decrease read as one wrap."""
    total, span, backwards, wraps, pairs = 0.0, 0.0, 0, 0, 0
    previous: tuple[float, float] | None = None
    for at, value in zip(times, values, strict=True):
        if value is None:
            continue
        if previous is not None:
            delta = value - previous[1]
            if delta < 0 and wrap is not None and wrap > 0:
                delta += wrap
                wraps += 1
            if delta >= 0:
                total += delta
                span += at - previous[0]
                pairs += 1
            else:
                backwards += 1
        previous = (at, value)
    if pairs == 0:
        return None
    return _Counter(total_j=total, span_s=span, backwards=backwards, wraps=wraps)


def _integral(
    times: Sequence[float], power: Sequence[float | None]
) -> tuple[float, float, float] | None:
    """(energy J, seconds covered, peak W) by the trapezoid rule over sampled power."""
    total, span, peak, pairs = 0.0, 0.0, -math.inf, 0
    previous: tuple[float, float] | None = None
    for at, value in zip(times, power, strict=True):
        if value is None:
            previous = None  # a gap: no power is assumed across it
            continue
        peak = max(peak, value)
        if previous is not None:
            total += 0.5 * (value + previous[1]) * (at - previous[0])
            span += at - previous[0]
            pairs += 1
        previous = (at, value)
    if peak == -math.inf:
        return None
    return (total, span, peak) if pairs else (0.0, 0.0, peak)


def _median(values: list[float]) -> float:
    """The median by selection, linear on average (numpy's introselect)."""
    import numpy as np  # lazily: a summary is often read without any sampling

    array = np.asarray(values, dtype=float)
    half = len(array) // 2
    if len(array) % 2:
        return float(np.partition(array, half)[half])
    part = np.partition(array, [half - 1, half])
    return float((part[half - 1] + part[half]) / 2.0)


def _throttle(
    series: Series, bits_seen: int, clocks: list[float]
) -> tuple[bool | None, tuple[str, ...]]:
    reasons: list[str] = []
    bit = 0
    while bits_seen >> bit:
        if bits_seen >> bit & 1:
            reasons.append(series.throttle_names.get(bit, f"throttle bit {bit}"))
        bit += 1
    if clocks:
        peak = max(clocks)
        low = _sustained_low(clocks, peak * (1.0 - CLOCK_SAG_FRACTION))
        if peak > 0 and low is not None:
            reasons.append(
                f"GFX clock fell to {low:.0f} MHz, {100 * (1 - low / peak):.0f}% below "
                f"the window's peak of {peak:.0f} MHz"
            )
    if THROTTLE not in series.channels and not clocks:
        return None, ()
    return bool(reasons), tuple(reasons)


def _sustained_low(clocks: Sequence[float], below: float) -> float | None:
    """The lowest clock of a sag below `below` that lasts two readings or more in a row,
    else None: one low reading is a clock ramping up from idle as the work starts, or a
    pause between kernels, not throttling."""
    lowest: float | None = None
    run: list[float] = []
    for clock in (*clocks, math.inf):
        if clock < below:
            run.append(clock)
            continue
        if len(run) >= 2:
            lowest = min(run) if lowest is None else min(lowest, *run)
        run = []
    return lowest


def summarize(series: Series) -> Energy:
    """Figures over `series.window` when set, else over the whole series; one pass over
    the samples per channel (the clock median by selection)."""
    indices = _window_indices(series)
    times = [series.t[i] for i in indices]
    notes: list[str] = []
    for source, why in series.missing.items():
        notes.append(f"{source} not used: {why}")
    if series.stopped:
        notes.append(f"sampling stopped early: {series.stopped}")
    if len(times) < 2:
        notes.append(f"only {len(times)} sample(s) in the window")

    def channel(name: str) -> list[float | None]:
        values = series.channel(name)
        return [values[i] for i in indices]

    integral = _integral(times, channel(POWER_W))
    counter = _counter(times, channel(ENERGY_J), series.wrap_j.get(ENERGY_J))
    if counter is not None and counter.backwards:
        notes.append(
            f"energy counter went backwards {counter.backwards} time(s) with no known wrap "
            "value: those intervals are left out of the counter's energy"
        )
    if counter is not None and counter.wraps:
        notes.append(f"energy counter wrapped {counter.wraps} time(s); corrected")
    integral_j = integral[0] if integral is not None and integral[1] > 0 else None
    counter_j = counter.total_j if counter is not None and counter.span_s > 0 else None
    averaging = _longest(channel(POWER_AVG_S), channel(POWER_W))
    disagreement: float | None = None
    suspect: bool | None = None
    tolerance: float | None = None
    energy = counter_j if counter_j is not None else integral_j
    if counter_j is not None and integral_j is not None and integral_j > 0:
        # Compared as mean powers, each over the time it covers: a missed power reading
        # leaves a gap in the integral that the counter does not have.
        assert counter is not None and integral is not None
        counter_w, integral_w = counter_j / counter.span_s, integral_j / integral[1]
        disagreement = abs(counter_w - integral_w) / integral_w
        span = times[-1] - times[0]
        if counter.span_s < span:  # intervals the counter left out: its power over all
            energy = counter_w * span
        lag = (averaging or 0.0) * integral[2] / (integral[1] * integral_w)
        tolerance = ENERGY_DISAGREEMENT + lag
        if lag > LAG_CHECK_LIMIT:
            notes.append(
                f"energy counter not checked: the power readings are averaged over "
                f"{averaging:g} s, too long for a {integral[1]:.2g} s window to compare "
                "them with it"
            )
        else:
            suspect = disagreement > tolerance
            if lag > 0:
                notes.append(
                    f"power read as a {averaging:g} s average: the counter check allows "
                    f"{100 * tolerance:.0f}% for its lag over the {integral[1]:.2g} s window"
                )
        if suspect:
            energy = integral_j
            notes.append(
                f"energy counter disagrees with integrated power by "
                f"{100 * disagreement:.0f}% (over {100 * tolerance:.0f}%): "
                "the integral is used"
            )

    throttle_bits = 0
    for value in channel(THROTTLE):
        if value is not None:
            throttle_bits |= int(value)
    clocks = [v for v in channel(GFX_CLOCK_MHZ) if v is not None]
    throttled, reasons = _throttle(series, throttle_bits, clocks)

    cpu = _counter(times, channel(CPU_ENERGY_J), series.wrap_j.get(CPU_ENERGY_J))
    if cpu is not None and cpu.backwards:
        notes.append(
            f"CPU energy counter went backwards {cpu.backwards} time(s) with no known "
            "wrap value: those intervals are left out"
        )
    cpu_j = cpu.total_j if cpu is not None and cpu.span_s > 0 else None
    duration = times[-1] - times[0] if len(times) >= 2 else None
    mean_power: float | None = None
    if integral is not None and integral[1] > 0:
        mean_power = integral[0] / integral[1]
    elif counter is not None and counter.span_s > 0:
        mean_power = counter.total_j / counter.span_s
    peak = integral[2] if integral is not None else None
    shared = tuple(dict.fromkeys(
        d for name in (POWER_W, ENERGY_J) for d in series.shared_by.get(name, ())))
    package_power = package_energy = None
    if shared:
        package_power, package_energy = mean_power, energy
        mean_power = peak = energy = None
        notes.append(f"power and energy are read for the package that {', '.join(shared)} "
                     "share, not for this device alone")
    return Energy(
        duration_s=duration,
        mean_power_w=mean_power,
        peak_power_w=peak,
        energy_counter_j=counter_j,
        energy_integral_j=integral_j,
        energy_j=energy,
        disagreement=disagreement,
        counter_suspect=suspect,
        clock_min_mhz=min(clocks) if clocks else None,
        clock_median_mhz=_median(clocks) if clocks else None,
        throttled=throttled,
        throttle_reasons=reasons,
        cpu_energy_j=cpu_j,
        cpu_mean_power_w=cpu_j / cpu.span_s if cpu is not None and cpu_j is not None else None,
        notes=tuple(notes),
        power_averaging_s=averaging,
        tolerance=tolerance,
        package_power_w=package_power,
        package_energy_j=package_energy,
        package_devices=shared,
    )


def _longest(averaging: Sequence[float | None], power: Sequence[float | None]
             ) -> float | None:
    """The longest averaging window of the power readings that were read; None when no
    reading says (instantaneous power, or a series from before it was recorded)."""
    windows = [a for a, p in zip(averaging, power, strict=True)
               if a is not None and p is not None]
    return max(windows) if windows else None


def combine(energies: Sequence[Energy]) -> Energy | None:
    """One case's summary over the processes that measured it: the median of their mean
    powers, energies and clock medians (as the figure is the median of their times), the
    highest peak and the lowest clock, and throttled or suspect if any process was. The
    package figures of processes whose devices share a package are each the whole
    package's, so they too are the median, not a total."""
    if not energies:
        return None
    if len(energies) == 1:
        return energies[0]

    def median(name: str) -> float | None:
        values = [v for e in energies if (v := getattr(e, name)) is not None]
        return _median(values) if values else None

    def extreme(name: str, pick: Callable[[list[float]], float]) -> float | None:
        values = [v for e in energies if (v := getattr(e, name)) is not None]
        return pick(values) if values else None

    def any_of(name: str) -> bool | None:
        values = [v for e in energies if (v := getattr(e, name)) is not None]
        return any(values) if values else None

    def union(name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for e in energies for s in getattr(e, name)))

    return Energy(
        duration_s=median("duration_s"),
        mean_power_w=median("mean_power_w"),
        peak_power_w=extreme("peak_power_w", max),
        energy_counter_j=median("energy_counter_j"),
        energy_integral_j=median("energy_integral_j"),
        energy_j=median("energy_j"),
        disagreement=extreme("disagreement", max),
        counter_suspect=any_of("counter_suspect"),
        clock_min_mhz=extreme("clock_min_mhz", min),
        clock_median_mhz=median("clock_median_mhz"),
        throttled=any_of("throttled"),
        throttle_reasons=union("throttle_reasons"),
        cpu_energy_j=median("cpu_energy_j"),
        cpu_mean_power_w=median("cpu_mean_power_w"),
        notes=union("notes"),
        power_averaging_s=extreme("power_averaging_s", max),
        tolerance=extreme("tolerance", max),
        # Each process that shares the package reads all of it: the median, never a sum.
        package_power_w=median("package_power_w"),
        package_energy_j=median("package_energy_j"),
        package_devices=union("package_devices"),
    )

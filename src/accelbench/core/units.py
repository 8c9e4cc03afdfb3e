"""Every number and value written for people: the one place that decides how a figure,
a time, a size, a share, a ratio, a p-value, a timestamp or a switch reads. Stored values
stay in base units; only the text is made here.

Absent values (None, NaN) read "-" everywhere.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
# Power and energy also go below their unit: a small kernel's call takes millijoules.
_SI_SMALL = (*_SI[:-1], (1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))
_SMALL_UNITS = ("W", "J")
_TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BINARY = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
_SIZE_SUFFIXES = ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))
MISSING = "-"


def _absent(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _sig(x: float) -> str:
    """Three significant digits, without scientific notation for everyday magnitudes."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    digits = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:.{digits}f}"


def _si_unit(unit: str) -> bool:
    return unit.endswith(("/s", "/J")) or unit in ("B", "FLOP", *_SMALL_UNITS)


# -- figures -----------------------------------------------------------------------------


def format_value(value: float | None, unit: str) -> str:
    """`5.52e10, "FLOP/s"` -> "55.2 GFLOP/s"; `4.3e-6, "s"` -> "4.30 µs";
    `0.0123, "J"` -> "12.3 mJ"; `2.1e11, "FLOP/J"` -> "210 GFLOP/J"."""
    if _absent(value):
        return MISSING
    assert value is not None
    if unit == "s":
        return format_time(value)
    if _si_unit(unit):
        prefixes = _SI_SMALL if unit in _SMALL_UNITS and value != 0 else _SI
        for scale, prefix in prefixes:
            if abs(value) >= scale or scale == prefixes[-1][0]:
                return f"{_sig(value / scale)} {prefix}{unit}"
    return f"{_sig(value)} {unit}".strip()


def format_time(seconds: float | None) -> str:
    """Seconds with the unit that keeps three digits readable: 4.3e-6 -> "4.30 µs"."""
    if _absent(seconds):
        return MISSING
    assert seconds is not None
    for scale, name in _TIME:
        if abs(seconds) >= scale or name == "ns":
            return f"{_sig(seconds / scale)} {name}"
    raise AssertionError("unreachable")


def format_number(value: float | None) -> str:
    """A bare number to three significant digits (a count per step, an observed value)."""
    return MISSING if _absent(value) else f"{value:.3g}"


def axis_scale(values: Sequence[float | None], unit: str) -> tuple[float, str]:
    """One prefix for a whole chart axis, from its largest value: (divisor, unit shown)."""
    top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    if _si_unit(unit):
        for factor, prefix in _SI[:-1]:
            if top >= factor:
                return factor, prefix + unit
    if unit == "s":
        for factor, name in _TIME:
            if top >= factor:
                return factor, name
        return _TIME[-1]
    return 1.0, unit


# -- sizes -------------------------------------------------------------------------------


def format_bytes(value: float | None, decimals: int | None = None) -> str:
    """Binary units (1 KiB = 1024 B), as memory is sold and reported.

    Three significant digits by default (5 << 20 -> "5.00 MiB"), else `decimals` after the
    point (68702699520, 1 -> "64.0 GiB"). Sizes under 1 KiB are whole bytes.
    """
    if _absent(value):
        return MISSING
    assert value is not None
    for scale, unit in _BINARY:
        if abs(value) >= scale:
            shown = value / scale
            return f"{_sig(shown) if decimals is None else f'{shown:.{decimals}f}'} {unit}"
    return f"{int(value)} B"


def format_size(size: int | None) -> str:
    """A message size as `-p bytes=` takes it, in its shortest exact binary form:
    65536 -> "64K", 1000 -> "1000"."""
    if size is None:
        return MISSING
    for unit, suffix in _SIZE_SUFFIXES:
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


# -- shares, ratios, tests ---------------------------------------------------------------


def format_pct(value: float | None) -> str:
    """A value already in percent: 87.26 -> "87.3%"."""
    return MISSING if _absent(value) else f"{value:.1f}%"


def format_share(fraction: float | None) -> str:
    """A fraction as a percentage: 0.478 -> "47.8%"."""
    return MISSING if _absent(fraction) else f"{100 * fraction:.1f}%"  # type: ignore[operator]


# Above ±50% an interval is shown as a factor: a half-width of ±3,491% reads as a
# precision, when it says that the figure is known to within a factor of about 70 either
# way. Up to here "±x%" reads plainly (its low end is half the figure or more).
WIDE_INTERVAL = 0.5


def interval_factor(rel: float) -> float:
    """The factor F of the interval [v / F, v * F] as wide as a relative half-width `rel`
    of v: (F - 1 / F) / 2 = rel. accelbench's intervals between processes and of ratios
    are symmetric on the log scale, so this is their own factor, sqrt(high / low)."""
    return rel + math.sqrt(1.0 + rel * rel)


def format_rel(value: float | None) -> str:
    """A relative half-width as "±1.2%"; above `WIDE_INTERVAL` (±50%) as the factor the
    interval spans either way of the figure, "×/÷ 69.8" for ±3,491% (see
    `interval_factor`)."""
    if _absent(value):
        return MISSING
    assert value is not None
    if value > WIDE_INTERVAL:
        return format_spread_factor(interval_factor(value))
    return f"±{100 * value:.1f}%"


def format_spread_factor(factor: float) -> str:
    """An interval [v / F, v * F] as "×/÷ F", F to three significant digits."""
    if not math.isfinite(factor):
        return "×/÷ ∞"
    return f"×/÷ {_sig(factor) if factor < 1e6 else f'{factor:.2e}'}"


def format_ratio(value: float | None, low: float | None = None,
                 high: float | None = None) -> str:
    """A ratio with its interval when both ends are finite: "1.042 [1.010, 1.075]"."""
    if value is None or not math.isfinite(value):
        return MISSING
    text = f"{value:.3f}"
    if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
        text += f" [{low:.3f}, {high:.3f}]"
    return text


def format_factor(value: float | None) -> str:
    """A speed relative to a baseline: 1.234 -> "1.23x"."""
    return MISSING if value is None or not math.isfinite(value) else f"{value:.2f}x"


def format_change(fraction: float | None) -> str:
    """A signed change: 0.123 -> "+12.3%"."""
    if fraction is None or not math.isfinite(fraction):
        return MISSING
    return f"{100 * fraction:+.1f}%"


def format_p(p: float | None) -> str:
    """A p-value to two digits; below 1e-4 it is only "<1e-4"."""
    if p is None:
        return MISSING
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


# -- time stamps, switches, plain values -------------------------------------------------


def format_timestamp(timestamp: float, seconds: bool = False) -> str:
    """A Unix time in UTC, to the minute (or the second): "2024-05-01 13:07"."""
    when = dt.datetime.fromtimestamp(timestamp, dt.timezone.utc)
    return f"{when:%Y-%m-%d %H:%M:%S}" if seconds else f"{when:%Y-%m-%d %H:%M}"


def format_bool(value: bool) -> str:
    """Switches read "yes"/"no", in parameters and in fingerprints alike (as in case
    labels, see `Case.label`)."""
    return "yes" if value else "no"


def format_plain(value: Any) -> str:
    """A value with no unit: switches as yes/no, sequences comma-separated, else str()."""
    if isinstance(value, bool):
        return format_bool(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(format_plain(v) for v in value)
    return str(value)


def format_params(pairs: Sequence[tuple[str, Any]]) -> str:
    """Parameters as a table shows them: `shape=4096 pinned=yes`."""
    return " ".join(f"{name}={format_plain(value)}" for name, value in pairs)

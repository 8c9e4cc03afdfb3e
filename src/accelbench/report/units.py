"""Formatting numbers with their units for people (stored values stay in base units)."""

from __future__ import annotations

import math

_SI = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_TIME = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]


def format_value(value: float | None, unit: str) -> str:
    """`5.52e10, "FLOP/s"` -> "55.2 GFLOP/s"; `4.3e-6, "s"` -> "4.30 µs"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit == "s":
        for scale, name in _TIME:
            if abs(value) >= scale or name == "ns":
                return f"{_sig(value / scale)} {name}"
    if unit.endswith("/s") or unit in ("B", "FLOP"):
        for scale, prefix in _SI:
            if abs(value) >= scale or prefix == "":
                return f"{_sig(value / scale)} {prefix}{unit}"
    return f"{_sig(value)} {unit}".strip()


def _sig(x: float) -> str:
    """Three significant digits, without scientific notation for everyday magnitudes."""
    if x == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:.{digits}f}"


def format_pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def format_rel(value: float | None) -> str:
    """A relative half-width as "±1.2%"."""
    if value is None or math.isnan(value):
        return "-"
    return f"±{100 * value:.1f}%"

"""A time series of device and host telemetry sampled beside one benchmark case.

The series is the raw record: readings as the sources gave them, None where a source had
nothing to say at that moment. Energy, throttling and clock statistics are derived from it
by `summary.summarize`, never stored in its place, so a better summary can be computed
later from the same record.

Format history of Series.to_dict() (SERIES_FORMAT):
  1: first version.
  2: "shared_by": channels whose reading is of a package shared by several devices (the
     two GCDs of an MI250X, the partitions of a GPU), with those devices; and the
     POWER_AVG_S channel, the window each power reading is averaged over. A format-1
     series has neither and loads as one whose readings are its device's own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench.core.formats import read_version

SERIES_FORMAT = 2

# Channels, with their unit in the name. Counters (ENERGY_J, CPU_ENERGY_J) are stored as
# read, before any wrap correction: the correction needs the wrap value, kept in wrap_j.
POWER_W = "power_w"
# Seconds over which the source averaged each POWER_W reading: 0 for an instantaneous
# reading (NVML's instant power field, MI300's current socket power), 1 for a 1 s average
# (nvmlDeviceGetPowerUsage on Ampere and later but GA100, MI200's average socket power).
POWER_AVG_S = "power_avg_s"
ENERGY_J = "energy_j"
GFX_CLOCK_MHZ = "gfx_clock_mhz"
MEM_CLOCK_MHZ = "mem_clock_mhz"
TEMP_C = "temp_c"
UTIL_PCT = "util_pct"
MEM_USED_B = "mem_used_b"
THROTTLE = "throttle"
CPU_ENERGY_J = "cpu_energy_j"
CPU_FREQ_MHZ = "cpu_freq_mhz"
LOAD1 = "load1"
STEAL_PCT = "steal_pct"

CHANNELS = (
    POWER_W, ENERGY_J, GFX_CLOCK_MHZ, MEM_CLOCK_MHZ, TEMP_C, UTIL_PCT, MEM_USED_B, THROTTLE,
    CPU_ENERGY_J, CPU_FREQ_MHZ, LOAD1, STEAL_PCT, POWER_AVG_S,
)  # fmt: skip

# Decimals kept in to_dict(): no finer than the sources resolve (NVML power is in mW, the
# energy counters in mJ or µJ, clocks in MHz), so rounding loses nothing that was measured.
_DIGITS: Mapping[str, int] = {
    POWER_W: 3, ENERGY_J: 3, GFX_CLOCK_MHZ: 1, MEM_CLOCK_MHZ: 1, TEMP_C: 1, UTIL_PCT: 1,
    MEM_USED_B: 0, THROTTLE: 0, CPU_ENERGY_J: 6, CPU_FREQ_MHZ: 1, LOAD1: 2, STEAL_PCT: 2,
    POWER_AVG_S: 3,
}  # fmt: skip
_DEFAULT_DIGITS = 4
_TIME_DIGITS = 4  # 0.1 ms: far below any sampling interval in use

Value = float | None


@dataclass(frozen=True)
class Series:
    """Readings at times `t` (seconds since the first sample), one tuple per channel.

    `sources` are the sources that answered; `missing` says, per source, why it was not
    used; `stopped` says why sampling, or one source, ended early. `wrap_j` gives the value
    a counter channel wraps at where it is known, and `throttle_names` the meaning of each
    bit of the THROTTLE channel. `window` is the timed part of the case, in the time base
    of `t`, when the caller marked it. `shared_by` names, for a channel whose reading is of
    a package that several devices share, those devices (PCI addresses or UUIDs); a
    channel not in it is the device's own.
    """

    interval_s: float
    t: tuple[float, ...] = ()
    channels: Mapping[str, tuple[Value, ...]] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    missing: Mapping[str, str] = field(default_factory=dict)
    stopped: str | None = None
    wrap_j: Mapping[str, float] = field(default_factory=dict)
    throttle_names: Mapping[int, str] = field(default_factory=dict)
    window: tuple[float, float] | None = None
    shared_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, values in self.channels.items():
            if len(values) != len(self.t):
                raise ValueError(
                    f"channel {name!r} has {len(values)} values for {len(self.t)} times"
                )

    def channel(self, name: str) -> tuple[Value, ...]:
        """The channel's values, or all None when the series lacks it."""
        values = self.channels.get(name)
        return values if values is not None else (None,) * len(self.t)

    def to_dict(self) -> dict[str, object]:
        """A compact JSON-safe dict; channels that never answered are left out."""
        data: dict[str, object] = {
            "format_version": SERIES_FORMAT,
            "interval_s": self.interval_s,
            "t": [round(x, _TIME_DIGITS) for x in self.t],
            "channels": {
                name: [_round(v, _DIGITS.get(name, _DEFAULT_DIGITS)) for v in values]
                for name, values in self.channels.items()
                if any(v is not None for v in values)
            },
            "sources": list(self.sources),
        }
        if self.missing:
            data["missing"] = dict(self.missing)
        if self.stopped is not None:
            data["stopped"] = self.stopped
        if self.wrap_j:
            data["wrap_j"] = dict(self.wrap_j)
        if self.throttle_names:
            data["throttle_names"] = {str(bit): n for bit, n in self.throttle_names.items()}
        if self.window is not None:
            data["window"] = [round(x, _TIME_DIGITS) for x in self.window]
        if self.shared_by:
            data["shared_by"] = {name: list(devices) for name, devices in self.shared_by.items()}
        return data

    @classmethod
    def from_dict(cls, data: object) -> Series:
        """The series `to_dict` wrote. ValueError or TypeError when the dict is malformed,
        or was written by a newer accelbench than this one."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a series is a dict, not {type(data).__name__}")
        read_version(dict(data), "telemetry series", SERIES_FORMAT, default=None,
                     error=ValueError)
        interval = _number(data.get("interval_s"), "interval_s")
        if not interval > 0 or not math.isfinite(interval):
            raise ValueError(f"series interval_s must be positive, got {interval}")
        times = tuple(_number(x, "t") for x in _list(data.get("t", []), "t"))
        channels = {
            _str(name, "channel name"): tuple(
                None if v is None else _number(v, f"channel {name}")
                for v in _list(values, f"channel {name}")
            )
            for name, values in _dict(data.get("channels", {}), "channels").items()
        }
        window_data = data.get("window")
        window: tuple[float, float] | None = None
        if window_data is not None:
            bounds = _list(window_data, "window")
            if len(bounds) != 2:
                raise ValueError("series window must be [start, end]")
            window = (_number(bounds[0], "window"), _number(bounds[1], "window"))
        names: dict[int, str] = {}
        for bit, name in _dict(data.get("throttle_names", {}), "throttle_names").items():
            try:
                names[int(bit)] = _str(name, "throttle name")
            except ValueError as exc:
                raise ValueError(f"throttle bit {bit!r} is not an integer") from exc
        stopped = data.get("stopped")
        return cls(
            interval_s=interval,
            t=times,
            channels=channels,
            sources=tuple(_str(s, "source") for s in _list(data.get("sources", []), "sources")),
            missing={
                _str(k, "source"): _str(v, "reason")
                for k, v in _dict(data.get("missing", {}), "missing").items()
            },
            stopped=None if stopped is None else _str(stopped, "stopped"),
            wrap_j={
                _str(k, "channel"): _number(v, "wrap_j")
                for k, v in _dict(data.get("wrap_j", {}), "wrap_j").items()
            },
            throttle_names=names,
            window=window,
            shared_by={
                _str(name, "channel"): tuple(_str(d, "device") for d in _list(devices, "devices"))
                for name, devices in _dict(data.get("shared_by", {}), "shared_by").items()
            },
        )


def _round(value: Value, digits: int) -> float | int | None:
    if value is None:
        return None
    return round(value) if digits == 0 else round(value, digits)


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"series {what}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"series {what}: {value!r} is not finite")
    # An integer stays one: a 64-bit throttle bitmask would lose its low bits as a float.
    return value if isinstance(value, int) else float(value)


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"series {what}: expected a string, got {value!r}")
    return value


def _list(value: object, what: str) -> list[object]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"series {what}: expected a list, got {type(value).__name__}")
    return list(value)


def _dict(value: object, what: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"series {what}: expected a dict, got {type(value).__name__}")
    return value

"""NVIDIA telemetry through NVML (the nvidia-ml-py distribution, imported as pynvml)."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Mapping
from typing import Any

from accelbench.core.telemetry import (
    ENERGY_J,
    GFX_CLOCK_MHZ,
    MEM_CLOCK_MHZ,
    MEM_USED_B,
    POWER_W,
    TEMP_C,
    THROTTLE,
    UTIL_PCT,
)
from accelbench.env.telemetry.guard import (
    Guard,
    Importer,
    SourceUnavailable,
    load_binding,
    vendor_errors,
)

# nvmlClocksEventReasons bits that hold the clock down. GpuIdle (0x1),
# ApplicationsClocksSetting (0x2) and DisplayClockSetting (0x100) are cleared from the
# THROTTLE channel: they are the clock following the load or a setting, not a limit, and
# an idle gap between kernels would otherwise read as throttling.
NVML_THROTTLE_NAMES: Mapping[int, str] = {
    2: "SwPowerCap",
    3: "HwSlowdown",
    4: "SyncBoost",
    5: "SwThermalSlowdown",
    6: "HwThermalSlowdown",
    7: "HwPowerBrakeSlowdown",
}
_THROTTLE_MASK = sum(1 << bit for bit in NVML_THROTTLE_NAMES)

# nvmlDeviceGetTotalEnergyConsumption is an unsigned long long of mJ.
NVML_ENERGY_WRAP_J = 2.0**64 / 1000.0


class NvmlSource:
    """One NVML device; `read()` gives None for a channel whose call failed."""

    name = "nvml"

    def __init__(self, nvml: Any, handle: object) -> None:
        self._nvml = nvml
        self._handle = handle
        self._errors = vendor_errors(nvml, "NVMLError")
        self._answered = False
        self.wrap_j: Mapping[str, float] = {ENERGY_J: NVML_ENERGY_WRAP_J}
        self.throttle_names: Mapping[int, str] = NVML_THROTTLE_NAMES
        # Renamed in driver 535 (ClocksThrottleReasons -> ClocksEventReasons).
        self._reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )

    @classmethod
    def open(cls, index: int, *, importer: Importer = importlib.import_module) -> NvmlSource:
        """NVML started and the device at `index` found; SourceUnavailable otherwise."""
        nvml = load_binding("pynvml", importer)
        errors = vendor_errors(nvml, "NVMLError")
        try:
            nvml.nvmlInit()
        except errors as exc:
            raise SourceUnavailable(f"NVML did not start: {exc}") from exc
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except errors as exc:
            _shutdown(nvml, errors)
            raise SourceUnavailable(f"NVML has no device {index}: {exc}") from exc
        return cls(nvml, handle)

    def read(self) -> dict[str, float | None]:
        nvml, h, guard = self._nvml, self._handle, Guard(self._errors)
        power = guard.call(nvml.nvmlDeviceGetPowerUsage, h)
        energy = guard.call(nvml.nvmlDeviceGetTotalEnergyConsumption, h)
        sm = guard.call(nvml.nvmlDeviceGetClockInfo, h, getattr(nvml, "NVML_CLOCK_SM", 1))
        mem = guard.call(nvml.nvmlDeviceGetClockInfo, h, getattr(nvml, "NVML_CLOCK_MEM", 2))
        temp = guard.call(
            nvml.nvmlDeviceGetTemperature, h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        )
        rates = guard.call(nvml.nvmlDeviceGetUtilizationRates, h)
        memory = guard.call(nvml.nvmlDeviceGetMemoryInfo, h)
        reasons = guard.call(self._reasons, h) if self._reasons is not None else None
        reading = {
            POWER_W: _scaled(power, 1e-3),
            ENERGY_J: _scaled(energy, 1e-3),
            GFX_CLOCK_MHZ: _scaled(sm, 1.0),
            MEM_CLOCK_MHZ: _scaled(mem, 1.0),
            TEMP_C: _scaled(temp, 1.0),
            UTIL_PCT: _scaled(getattr(rates, "gpu", None), 1.0),
            MEM_USED_B: _scaled(getattr(memory, "used", None), 1.0),
            THROTTLE: float(reasons & _THROTTLE_MASK) if isinstance(reasons, int) else None,
        }
        self._answered = guard.settle(reading, self._answered)
        return reading

    def close(self) -> None:
        _shutdown(self._nvml, self._errors)


def _scaled(value: object, factor: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) * factor


def _shutdown(nvml: Any, errors: tuple[type[BaseException], ...]) -> None:
    with contextlib.suppress(*errors):
        nvml.nvmlShutdown()


"""NVIDIA telemetry through NVML (the nvidia-ml-py distribution, imported as pynvml).

Power. nvmlDeviceGetPowerUsage returns, on Ampere and later GPUs other than GA100 (A100,
A30), the power averaged over the last second, not the power now (NVML's documentation
of the call); its integral over a short window lags the energy counter. The field
NVML_FI_DEV_POWER_INSTANT (nvmlDeviceGetFieldValues, drivers of the 530 series on) is the
instantaneous power on every architecture, so it is read where the driver answers it,
and nvmlDeviceGetPowerUsage otherwise. Each reading records in POWER_AVG_S the window it
was averaged over (0 for the instant field), which the energy check allows for.

Energy. nvmlDeviceGetTotalEnergyConsumption is an unsigned 64-bit count of mJ since the
driver was loaded (Volta and later): it wraps after 1.8e13 kJ, centuries of any board's
power, so its wrap value is given for completeness and no narrower width is assumed.

MIG. NVML reads power and energy for the whole GPU, never for a MIG instance. A device
on a GPU in MIG mode is read as that GPU, with its power and energy marked as shared by
the GPU's MIG instances (Series.shared_by), so no instance is credited with all of it.
"""

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
    POWER_AVG_S,
    POWER_W,
    TEMP_C,
    THROTTLE,
    UTIL_PCT,
)
from accelbench.env.bindings import quietly
from accelbench.env.telemetry.guard import (
    Guard,
    Importer,
    SourceUnavailable,
    load_binding,
    vendor_errors,
)
from accelbench.env.telemetry.throttle import active_reasons

# nvmlClocksEventReasons bits (nvml.h) that hold the clock down: the power limit
# (SwPowerCap 0x4), a sync-boost group (SyncBoost 0x10) and the slowdowns (HwSlowdown 0x8,
# SwThermalSlowdown 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80). All are
# recorded, as a figure measured under any of them is below what the GPU does unheld;
# only the slowdowns fail a GPU (env.telemetry.throttle). GpuIdle (0x1),
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

# NVML_FI_DEV_POWER_INSTANT, for bindings older than the field (its value in nvml.h).
_FI_POWER_INSTANT = 186
_NVML_SUCCESS = 0
# nvmlValueType_t -> the member of the nvmlValue_t union that holds the value.
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                  6: "usVal"}
# nvmlDeviceGetPowerUsage averages over 1 s from Ampere on (NVML_DEVICE_ARCH_AMPERE = 7),
# except on GA100, whose products are named here.
_ARCH_AMPERE = 7
_GA100_NAMES = ("A100", "A30", "A800")
AVERAGED_POWER_S = 1.0


class NvmlSource:
    """One NVML device; `read()` gives None for a channel whose call failed."""

    name = "nvml"

    def __init__(self, nvml: Any, handle: object) -> None:
        self._nvml = nvml
        self._handle = handle
        self._errors = vendor_errors(nvml, "NVMLError")
        self._answered = False
        self.wrap_j: Mapping[str, float] = {ENERGY_J: NVML_ENERGY_WRAP_J}
        self._instant: bool | None = None  # whether the driver answers the instant field
        self._averaging_s = _usage_averaging(nvml, handle, self._errors)
        instances = _mig_instances(nvml, handle, self._errors)
        self.shared_by: Mapping[str, tuple[str, ...]] = (
            {POWER_W: instances, ENERGY_J: instances} if instances else {})
        # The names of the reasons seen active so far, never the ones that were not.
        self.throttle_names: dict[int, str] = {}
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
            quietly(nvml.nvmlInit)
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
        power, averaging = self._power(guard)
        energy = guard.call(nvml.nvmlDeviceGetTotalEnergyConsumption, h)
        sm = guard.call(nvml.nvmlDeviceGetClockInfo, h, getattr(nvml, "NVML_CLOCK_SM", 1))
        mem = guard.call(nvml.nvmlDeviceGetClockInfo, h, getattr(nvml, "NVML_CLOCK_MEM", 2))
        temp = guard.call(
            nvml.nvmlDeviceGetTemperature, h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        )
        rates = guard.call(nvml.nvmlDeviceGetUtilizationRates, h)
        memory = guard.call(nvml.nvmlDeviceGetMemoryInfo, h)
        reasons = guard.call(self._reasons, h) if self._reasons is not None else None
        throttle = (reasons & _THROTTLE_MASK
                    if isinstance(reasons, int) and not isinstance(reasons, bool) else None)
        if throttle:
            self.throttle_names.update(active_reasons(throttle, NVML_THROTTLE_NAMES))
        reading = {
            POWER_W: _scaled(power, 1e-3),
            POWER_AVG_S: averaging if power is not None else None,
            ENERGY_J: _scaled(energy, 1e-3),
            GFX_CLOCK_MHZ: _scaled(sm, 1.0),
            MEM_CLOCK_MHZ: _scaled(mem, 1.0),
            TEMP_C: _scaled(temp, 1.0),
            UTIL_PCT: _scaled(getattr(rates, "gpu", None), 1.0),
            MEM_USED_B: _scaled(getattr(memory, "used", None), 1.0),
            THROTTLE: float(throttle) if throttle is not None else None,
        }
        self._answered = guard.settle(reading, self._answered)
        return reading

    def close(self) -> None:
        _shutdown(self._nvml, self._errors)

    def _power(self, guard: Guard) -> tuple[float | None, float | None]:
        """(mW, seconds it is averaged over): the instant field while the driver answers
        it, nvmlDeviceGetPowerUsage otherwise. A driver that does not answer the field at
        the first reading is not asked again."""
        if self._instant is not False:
            fields = getattr(self._nvml, "nvmlDeviceGetFieldValues", _unknown)
            instant = _field_value(guard.call(fields, self._handle,
                                              [_instant_field(self._nvml)]))
            if self._instant is None:
                self._instant = instant is not None
            if instant is not None:
                return instant, 0.0
        usage = guard.call(self._nvml.nvmlDeviceGetPowerUsage, self._handle)
        return (usage if isinstance(usage, (int, float)) else None), self._averaging_s


def _instant_field(nvml: Any) -> int:
    field = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", _FI_POWER_INSTANT)
    return field if isinstance(field, int) else _FI_POWER_INSTANT


def _field_value(values: Any) -> float | None:
    """The one value of an nvmlDeviceGetFieldValues answer, None where NVML set an error
    in it (a field the driver does not know answers NOT_SUPPORTED there, not by raising)."""
    try:
        value = values[0]
    except (TypeError, IndexError, KeyError):
        return None
    if getattr(value, "nvmlReturn", None) != _NVML_SUCCESS:
        return None
    kind = getattr(value, "valueType", None)
    member = _VALUE_MEMBERS.get(kind) if isinstance(kind, int) else None
    number = getattr(getattr(value, "value", None), member, None) if member else None
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return None
    return float(number)


def _usage_averaging(nvml: Any, handle: object, errors: tuple[type[BaseException], ...]
                     ) -> float:
    """Seconds nvmlDeviceGetPowerUsage averages over on this GPU: 0 before Ampere and on
    GA100, 1 from Ampere on, and 1 where the architecture cannot be read (the longer
    window only widens the energy check's tolerance)."""
    guard = Guard(errors)
    arch = guard.call(getattr(nvml, "nvmlDeviceGetArchitecture", _unknown), handle)
    if not isinstance(arch, int) or arch == 0xFFFFFFFF:
        return AVERAGED_POWER_S
    if arch < _ARCH_AMPERE:
        return 0.0
    name = guard.call(getattr(nvml, "nvmlDeviceGetName", _unknown), handle)
    name = name.decode() if isinstance(name, bytes) else name
    if arch == _ARCH_AMPERE and isinstance(name, str) and any(
            part in name for part in _GA100_NAMES):
        return 0.0
    return AVERAGED_POWER_S


def _mig_instances(nvml: Any, handle: object, errors: tuple[type[BaseException], ...]
                   ) -> tuple[str, ...]:
    """The UUIDs of the MIG instances of a GPU in MIG mode (or one label for them where
    they cannot be listed); () for a GPU not in MIG mode."""
    guard = Guard(errors)
    mode = guard.call(getattr(nvml, "nvmlDeviceGetMigMode", _unknown), handle)
    enabled = getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)
    if not isinstance(mode, (list, tuple)) or not mode or mode[0] != enabled:
        return ()
    count = guard.call(getattr(nvml, "nvmlDeviceGetMaxMigDeviceCount", _unknown), handle)
    by_index = getattr(nvml, "nvmlDeviceGetMigDeviceHandleByIndex", _unknown)
    get_uuid = getattr(nvml, "nvmlDeviceGetUUID", _unknown)
    uuids: list[str] = []
    for i in range(count if isinstance(count, int) else 0):
        instance = guard.call(by_index, handle, i)
        uuid = guard.call(get_uuid, instance) if instance is not None else None
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        if isinstance(uuid, str):
            uuids.append(uuid)
    return tuple(uuids) or ("every MIG instance of its GPU",)


def _unknown(*args: object) -> None:
    """Stands in for a call the binding lacks."""
    raise AttributeError("not in this binding")


def _scaled(value: object, factor: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) * factor


def _shutdown(nvml: Any, errors: tuple[type[BaseException], ...]) -> None:
    with contextlib.suppress(*errors):
        nvml.nvmlShutdown()


"""Telemetry of a stress, read through the real sources from fakes of the vendor libraries:
an NVIDIA H100 SXM (NVML) and an AMD Instinct MI210 (amdsmi, whose Python binding before
ROCm 6.1 gives gpu_metrics' indep_throttle_status as the bitmask), each held at its power
limit under a GEMM for 20 s, read every 0.5 s.

The healthy run is what such a GPU does: it boosts to its top clock while it is cool, then,
as it warms and draws its limit, settles to the clock the limit sustains, with the power
limit's reason active for the rest of the run (NVML's SwPowerCap, with SyncBoost from its
sync-boost group; the SMU's PPT0). A faulty run adds a slowdown (a thermal or hardware
one) in some of the readings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from accelbench.core.telemetry import Series
from accelbench.env.telemetry import TelemetrySampler
from accelbench.env.telemetry.amd import AmdSmiSource
from accelbench.env.telemetry.nvidia import NvmlSource

INTERVAL_S = 0.5
READINGS = 40
LIMIT_FROM = 2  # the power limit is reached at the third reading

# The GFX clock: boost while cool (the first fifth of the run), then down to the clock the
# power limit sustains, 11% lower, where it stays.
H100_SM_MHZ = [1980] * 8 + [1935, 1890, 1830, 1785] + [1755] * 28
MI210_GFX_MHZ = [1700] * 8 + [1660, 1620, 1580, 1540] + [1510] * 28

# nvmlClocksEventReasons (nvml.h): SwPowerCap 0x4, SyncBoost 0x10.
SW_POWER_CAP, SYNC_BOOST = 0x4, 0x10
# gpu_metrics' indep_throttle_status: SMU_THROTTLER_PPT0_BIT, SMU_THROTTLER_TEMP_HOTSPOT_BIT.
PPT0, TEMP_HOTSPOT = 1 << 0, 1 << 36


def at_limit(reason: int) -> list[int]:
    """`reason` from the moment the power limit is reached."""
    return [0] * LIMIT_FROM + [reason] * (READINGS - LIMIT_FROM)


def with_slowdown(reasons: Sequence[int], slowdown: int, readings: range) -> list[int]:
    """`reasons` with `slowdown` added in `readings`."""
    return [r | slowdown if i in readings else r for i, r in enumerate(reasons)]


class NVMLError(Exception):
    pass


class FakeNvml:
    """pynvml on one H100 replaying `reasons` (one clock-event mask a reading)."""

    NVMLError = NVMLError
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, reasons: Sequence[int]) -> None:
        self.reasons, self.i = list(reasons), 0

    def _at(self, values: Sequence[int]) -> int:
        return values[min(self.i, len(values) - 1)]

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return "h100"

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        return 699_000 if self.i >= LIMIT_FROM else 412_000

    def nvmlDeviceGetTotalEnergyConsumption(self, h: str) -> int:
        return 9_000_000 + 350_000 * self.i

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int:
        return self._at(H100_SM_MHZ) if kind == 1 else 2619

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        return min(48 + self.i, 79)

    def nvmlDeviceGetUtilizationRates(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=100, memory=62)

    def nvmlDeviceGetMemoryInfo(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(used=41 << 30)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int:
        return self._at(self.reasons)


class AmdSmiException(Exception):
    pass


class FakeAmdSmi:
    """amdsmi on one MI210 replaying `masks` (one indep_throttle_status a reading)."""

    AmdSmiException = AmdSmiException
    AmdSmiClkType = SimpleNamespace(GFX=0, MEM=2)

    def __init__(self, masks: Sequence[int]) -> None:
        self.masks, self.i = list(masks), 0

    def amdsmi_init(self) -> None: ...
    def amdsmi_shut_down(self) -> None: ...

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gpu0"]

    def amdsmi_get_power_info(self, h: str) -> dict[str, Any]:
        return {"average_socket_power": 300 if self.i >= LIMIT_FROM else 190,
                "power_limit": 300}

    def amdsmi_get_energy_count(self, h: str) -> dict[str, Any]:
        return {"energy_accumulator": 61_000_000_000 + 9_830_000 * self.i,
                "counter_resolution": 15.259}

    def amdsmi_get_clock_info(self, h: str, kind: int) -> dict[str, Any]:
        return {"clk": MI210_GFX_MHZ[min(self.i, READINGS - 1)] if kind == 0 else 1600}

    def amdsmi_get_gpu_activity(self, h: str) -> dict[str, Any]:
        return {"gfx_activity": 100, "umc_activity": 58, "mm_activity": "N/A"}

    def amdsmi_get_gpu_vram_usage(self, h: str) -> dict[str, Any]:
        return {"vram_used": 30_720, "vram_total": 65_520}

    def amdsmi_get_gpu_metrics_info(self, h: str) -> dict[str, Any]:
        return {"indep_throttle_status": self.masks[min(self.i, READINGS - 1)],
                "throttle_status": 1}


def _importer(name: str, module: object) -> Callable[[str], object]:
    def importer(wanted: str) -> object:
        if wanted != name:
            raise ModuleNotFoundError(f"No module named {wanted!r}")
        return module

    return importer


def _sample(source: Any, fake: Any) -> Series:
    """READINGS readings of `source`, the fake stepped to each in turn."""
    now = [0.0]
    sampler = TelemetrySampler([source], {}, INTERVAL_S, clock=lambda: now[0])
    sampler.start(background=False)
    for i in range(1, READINGS):
        now[0] += INTERVAL_S
        fake.i = i
        if i < READINGS - 1:
            sampler.tick()
    return sampler.stop()  # the last reading is stop()'s own


def nvml_run(reasons: Sequence[int]) -> Series:
    fake = FakeNvml(reasons)
    return _sample(NvmlSource.open(0, importer=_importer("pynvml", fake)), fake)


def amdsmi_run(masks: Sequence[int]) -> Series:
    fake = FakeAmdSmi(masks)
    return _sample(AmdSmiSource.open(0, importer=_importer("amdsmi", fake)), fake)

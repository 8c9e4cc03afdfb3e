"""The GPU's energy counter against the integral of its power readings, on windows of load.

A GPU's driver keeps an energy counter (NVML's total energy since the driver loaded, in
mJ; amd-smi's energy accumulator times its resolution) and reports power, as an
instantaneous reading where the driver has one (NVML's `NVML_FI_DEV_POWER_INSTANT`,
amd-smi's `current_socket_power`) and as an average (`nvmlDeviceGetPowerUsage`, a
one-second average on recent NVIDIA GPUs; amd-smi's `average_socket_power`). accelbench
trusts the counter for a case's energy and checks it against the power integral, so the
device check measures both on plain bf16 GEMM load, with nothing of accelbench between:

- the counter read before the first product and after the last one has finished;
- each power reading sampled every 10 ms on a thread of its own over the same window and
  integrated by the trapezoid rule.

A window starts from an idle device (SETTLE_S after the previous one), so power steps up
at its start: an averaged reading lags that step and its integral reads low on a short
window, which is what the 2 s window shows beside the 10 s one.

Pure data and vendor seams here; gpu_reference.py runs it and gpu_expectations.py judges.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WINDOWS_S = (2.0, 10.0)
SAMPLE_S = 0.01  # power is read this often
SETTLE_S = 3.0  # idle before each window, so that each starts from the same state
GEMM_N = 4096  # big enough to hold the device at its power limit, short enough to stop on time

# nvml.h's field ids, for an nvidia-ml-py that does not name them.
NVML_FI_DEV_POWER_INSTANT = 186


@dataclass(frozen=True)
class EnergyWindow:
    """What one window of load gave: the counter's energy and each power integral, in J
    (None where the device gives no such reading)."""

    seconds: float
    counter_j: float | None
    instant_j: float | None
    average_j: float | None

    def over(self, integral: float | None) -> float | None:
        """counter / integral; None when either is missing or not positive."""
        if self.counter_j is None or integral is None or integral <= 0 or self.counter_j <= 0:
            return None
        return self.counter_j / integral


@dataclass(frozen=True)
class PowerSource:
    """A device's readings: each returns None where the driver offers no such reading."""

    name: str  # "NVML", "amd-smi"
    energy_j: Callable[[], float | None]
    instant_w: Callable[[], float | None]
    average_w: Callable[[], float | None]
    close: Callable[[], None]


def integrate(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """The trapezoid integral of (time, watts) samples over [start, end], in J; the
    first and last samples stand for the power at the window's ends."""
    inside = [(t, w) for t, w in samples if start <= t <= end]
    if len(inside) < 2:
        return None
    joules = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in
                 itertools.pairwise(inside))
    joules += (inside[0][0] - start) * inside[0][1] + (end - inside[-1][0]) * inside[-1][1]
    return joules


def _sampled(read: Callable[[], float | None], stop: threading.Event,
             into: list[tuple[float, float]]) -> None:
    while not stop.is_set():
        with contextlib.suppress(Exception):
            watts = read()
            if watts is not None:
                into.append((time.perf_counter(), watts))
        stop.wait(SAMPLE_S)


def measure_window(torch: Any, device: Any, source: PowerSource, seconds: float, *,
                   gemm_n: int = GEMM_N, settle: float = SETTLE_S) -> EnergyWindow:
    """Hold `device` busy with bf16 GEMMs of `gemm_n`³ for `seconds`, after `settle`
    seconds idle, and read `source` over it."""
    a = torch.rand(gemm_n, gemm_n, device=device, dtype=torch.bfloat16)
    b = torch.rand(gemm_n, gemm_n, device=device, dtype=torch.bfloat16)
    out = torch.empty_like(a)
    torch.cuda.synchronize()
    time.sleep(settle)
    instant: list[tuple[float, float]] = []
    average: list[tuple[float, float]] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_sampled, args=(read, stop, into), daemon=True)
               for read, into in ((source.instant_w, instant), (source.average_w, average))]
    for thread in threads:
        thread.start()
    time.sleep(0.1)  # both samplers have read the idle power before the window opens
    before = source.energy_j()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(8):
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
    end = time.perf_counter()
    after = source.energy_j()
    time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join()
    counter = after - before if before is not None and after is not None else None
    return EnergyWindow(end - start, counter, integrate(instant, start, end),
                        integrate(average, start, end))


def nvml_source(torch: Any, index: int) -> PowerSource:
    """NVML's readings for PyTorch's device `index`, found by its UUID."""
    pynvml = importlib.import_module("pynvml")
    pynvml.nvmlInit()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    handle = (pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}") if uuid is not None
              else pynvml.nvmlDeviceGetHandleByIndex(index))
    field = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", NVML_FI_DEV_POWER_INSTANT)

    def energy() -> float | None:
        return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1e3

    def instant() -> float | None:
        value = pynvml.nvmlDeviceGetFieldValues(handle, [field])[0]
        if value.nvmlReturn != pynvml.NVML_SUCCESS:
            return None
        return float(value.value.uiVal) / 1e3

    def average() -> float | None:
        return float(pynvml.nvmlDeviceGetPowerUsage(handle)) / 1e3

    return PowerSource("NVML", energy, instant, average, pynvml.nvmlShutdown)


def amdsmi_source(index: int) -> PowerSource:
    """amd-smi's readings for the GPU at `index` in its processor list (on a node whose
    HIP_VISIBLE_DEVICES is unset, PyTorch's order)."""
    amdsmi = importlib.import_module("amdsmi")
    amdsmi.amdsmi_init()
    handle = amdsmi.amdsmi_get_processor_handles()[index]

    def watts(key: str) -> float | None:
        value = amdsmi.amdsmi_get_power_info(handle).get(key)
        return float(value) if isinstance(value, (int, float)) else None

    def energy() -> float | None:
        count = amdsmi.amdsmi_get_energy_count(handle)
        ticks = count.get("energy_accumulator", count.get("power"))
        return float(ticks) * float(count["counter_resolution"]) / 1e6  # µJ per tick

    return PowerSource("amd-smi", energy, lambda: watts("current_socket_power"),
                       lambda: watts("average_socket_power"), amdsmi.amdsmi_shut_down)


def measure_energy(torch: Any, index: int, *, source: PowerSource | None = None,
                   windows: tuple[float, ...] = WINDOWS_S, gemm_n: int = GEMM_N,
                   settle: float = SETTLE_S) -> tuple[list[EnergyWindow], str | None]:
    """Each of `windows` on PyTorch's device `index`, read from `source` (default: the
    vendor's library), and why there is none."""
    try:
        if source is None:
            source = amdsmi_source(index) if torch.version.hip else nvml_source(torch, index)
    except Exception as exc:  # no vendor library, or a driver that refuses it
        first = (str(exc).splitlines() or [""])[0][:200]
        return [], f"no energy readings: {type(exc).__name__}: {first}"
    try:
        device = torch.device("cuda", index)
        return [measure_window(torch, device, source, s, gemm_n=gemm_n, settle=settle)
                for s in windows], None
    finally:
        with contextlib.suppress(Exception):
            source.close()

"""GPU utilisation and the compute processes on each device, when a vendor library says.

The bindings are optional: `pynvml` (the nvidia-ml-py distribution) for NVIDIA, `amdsmi`
for AMD. Both are imported lazily, only when a reading is asked for, and every call into
them is guarded: they raise their own error classes (NVMLError, AmdSmiException), and
AttributeError or TypeError where a binding is older or newer than the calls below. Any
of those makes the reading, or the part of it concerned, "unavailable" with the reason,
never an exception for the caller.

This part is deliberately small: device utilisation, the compute processes with the
memory they hold, and each process's share of the device over the window: from NVML's
per-process samples since the window's start, or, on AMD, from amdsmi's running counter
of each process's graphics-engine time (`engine_usage.gfx`, nanoseconds), read at both
ends of the window (`read_gpu_counters` opens it, `engine_shares` takes the difference).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from accelbench.env.bindings import BindingUnavailable, Importer, load_binding, quietly

T = TypeVar("T")


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a device; `utilization_percent` is its share of the device's
    compute over the window when the library reports it, else None."""

    pid: int
    used_memory_bytes: int | None = None
    utilization_percent: float | None = None
    engine_ns: int | None = None  # amdsmi: the process's graphics-engine time so far

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "used_memory_bytes": self.used_memory_bytes,
            "utilization_percent": self.utilization_percent,
            "engine_ns": self.engine_ns,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuProcess:
        return cls(
            pid=int(data["pid"]),
            used_memory_bytes=_opt_int(data.get("used_memory_bytes")),
            utilization_percent=_opt_float(data.get("utilization_percent")),
            engine_ns=_opt_int(data.get("engine_ns")),
        )


@dataclass(frozen=True)
class GpuDevice:
    """One device: its busy percentage now (whoever uses it) and its compute processes."""

    index: int
    name: str | None = None
    utilization_percent: float | None = None
    processes: tuple[GpuProcess, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "utilization_percent": self.utilization_percent,
            "processes": [proc.to_dict() for proc in self.processes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuDevice:
        return cls(
            index=int(data["index"]),
            name=data.get("name"),
            utilization_percent=_opt_float(data.get("utilization_percent")),
            processes=tuple(GpuProcess.from_dict(p) for p in data.get("processes") or ()),
        )


@dataclass(frozen=True)
class GpuReading:
    """What the vendor library said, or why there was nothing to say (`reason`)."""

    available: bool
    backend: str | None = None
    reason: str | None = None
    devices: tuple[GpuDevice, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "backend": self.backend,
            "reason": self.reason,
            "devices": [device.to_dict() for device in self.devices],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuReading:
        return cls(
            available=bool(data.get("available")),
            backend=data.get("backend"),
            reason=data.get("reason"),
            devices=tuple(GpuDevice.from_dict(d) for d in data.get("devices") or ()),
        )


# A GPU reading taken at the end of a window; the argument is the window's start (wall
# time, seconds), for libraries that report per-process use since a moment.
GpuSource = Callable[[float | None], GpuReading]


def _opt_int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _opt_float(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _call(fn: Callable[..., T], *args: object) -> T | None:
    """fn(*args), or None when the binding raises: its own errors, or a missing call."""
    try:
        return fn(*args)
    except Exception:  # vendor error classes do not share a base we can name here
        return None


def read_gpu(
    since: float | None = None, *, importer: Importer = importlib.import_module
) -> GpuReading:
    """Devices and their compute processes through the first vendor library that starts
    and finds devices: NVML, then amdsmi. `since` (wall time, s) bounds NVML's per-process
    samples to the window. Never raises.

    Both bindings may be installed on one node (the telemetry extra brings nvidia-ml-py
    to AMD nodes too), so a library that is there but does not start (nvmlInit without
    NVIDIA's driver) is a reason to try the next, not the answer. When none starts, the
    reading says why for each, with `backend` the first library that loaded."""
    readers: tuple[tuple[str, Callable[[Any], GpuReading]], ...] = (
        ("pynvml", lambda nvml: read_nvml(nvml, since)),
        ("amdsmi", read_amdsmi),
    )
    reasons: list[str] = []
    backends: list[str] = []  # the libraries that loaded, in order
    empty: GpuReading | None = None  # a library that started but found no devices
    for name, read in readers:
        try:
            reading = read(load_binding(name, importer))
        except BindingUnavailable as exc:
            reasons.append(str(exc))
            continue
        if reading.available and reading.devices:
            return reading
        backends.append(str(reading.backend))
        if reading.available:
            empty = empty or reading
        else:
            reasons.append(reading.reason or f"{reading.backend} did not start")
    if empty is not None:
        return empty
    return GpuReading(available=False, backend=backends[0] if backends else None,
                      reason="; ".join(reasons))


def read_gpu_counters(*, importer: Importer = importlib.import_module) -> GpuReading | None:
    """The opening reading of a window, for the library whose per-process figure is a
    running counter (amdsmi's engine time): None where amdsmi is not installed, does not
    start or lists no process with the counter (NVML needs no opening reading)."""
    try:
        reading = read_amdsmi(load_binding("amdsmi", importer))
    except BindingUnavailable:
        return None
    counted = any(proc.engine_ns is not None for device in reading.devices
                  for proc in device.processes)
    return reading if reading.available and counted else None


def engine_shares(opening: GpuReading | None, closing: GpuReading,
                  seconds: float) -> GpuReading:
    """`closing` with each process's share of its device over the `seconds` since
    `opening`, from the engine time it gained between the two, where the library gave
    no share itself. A process absent from the opening reading started on the device
    within the window: all of its engine time is the window's. Shares are held to
    0-100% (the counter of a process whose pid was reused can go backwards)."""
    if opening is None or seconds <= 0 or opening.backend != closing.backend:
        return closing
    before = {(device.index, proc.pid): proc.engine_ns
              for device in opening.devices for proc in device.processes}
    window_ns = seconds * 1e9

    def share(index: int, proc: GpuProcess) -> GpuProcess:
        if proc.utilization_percent is not None or proc.engine_ns is None:
            return proc
        gained = proc.engine_ns - (before.get((index, proc.pid)) or 0)
        return replace(proc, utilization_percent=round(
            min(100.0, max(0.0, 100.0 * gained / window_ns)), 1))

    return replace(closing, devices=tuple(
        replace(device, processes=tuple(share(device.index, p) for p in device.processes))
        for device in closing.devices))


# ----------------------------------------------------------------------------- NVIDIA


def read_nvml(nvml: Any, since: float | None = None) -> GpuReading:
    """Every NVML device's utilisation and compute processes."""
    try:
        quietly(nvml.nvmlInit)
    except Exception as exc:  # NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
        return GpuReading(available=False, backend="nvml", reason=f"NVML did not start: {exc}")
    try:
        count = _call(nvml.nvmlDeviceGetCount)
        if not isinstance(count, int):
            return GpuReading(available=False, backend="nvml", reason="NVML gave no devices")
        devices = tuple(_nvml_device(nvml, index, since) for index in range(count))
        return GpuReading(available=True, backend="nvml", devices=devices)
    finally:
        _call(nvml.nvmlShutdown)


def _nvml_device(nvml: Any, index: int, since: float | None) -> GpuDevice:
    handle = _call(nvml.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        return GpuDevice(index=index)
    name = _call(nvml.nvmlDeviceGetName, handle)
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    rates = _call(nvml.nvmlDeviceGetUtilizationRates, handle)
    shares = _nvml_process_shares(nvml, handle, since)
    running = _call(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    processes = tuple(
        GpuProcess(
            pid=int(proc.pid),
            used_memory_bytes=_opt_int(getattr(proc, "usedGpuMemory", None)),
            utilization_percent=shares.get(int(proc.pid)),
        )
        for proc in running
        if isinstance(getattr(proc, "pid", None), int)
    )
    return GpuDevice(
        index=index,
        name=name if isinstance(name, str) else None,
        utilization_percent=_opt_float(getattr(rates, "gpu", None)),
        processes=processes,
    )


def _nvml_process_shares(nvml: Any, handle: object, since: float | None) -> dict[int, float]:
    """Each pid's highest SM share in NVML's samples since `since`; empty when unsupported
    (NVML raises NotFound when no process ran in the window)."""
    stamp = int(since * 1_000_000) if since is not None else 0
    samples = _call(nvml.nvmlDeviceGetProcessUtilization, handle, stamp) or []
    shares: dict[int, float] = {}
    for sample in samples:
        pid, util = getattr(sample, "pid", None), _opt_float(getattr(sample, "smUtil", None))
        if isinstance(pid, int) and util is not None:
            shares[pid] = max(util, shares.get(pid, 0.0))
    return shares


# -------------------------------------------------------------------------------- AMD


def read_amdsmi(amdsmi: Any) -> GpuReading:
    """Every amdsmi device's graphics activity and compute processes."""
    try:
        quietly(amdsmi.amdsmi_init)
    except Exception as exc:  # AmdSmiLibraryException when the driver is not loaded
        return GpuReading(available=False, backend="amdsmi", reason=f"amdsmi did not start: {exc}")
    try:
        handles = _call(amdsmi.amdsmi_get_processor_handles)
        if not isinstance(handles, (list, tuple)):
            return GpuReading(available=False, backend="amdsmi", reason="amdsmi gave no devices")
        devices = tuple(_amd_device(amdsmi, index, h) for index, h in enumerate(handles))
        return GpuReading(available=True, backend="amdsmi", devices=devices)
    finally:
        _call(amdsmi.amdsmi_shut_down)


def _amd_device(amdsmi: Any, index: int, handle: object) -> GpuDevice:
    activity = _call(amdsmi.amdsmi_get_gpu_activity, handle)
    asic = _call(amdsmi.amdsmi_get_gpu_asic_info, handle)
    name = asic.get("market_name") if isinstance(asic, dict) else None
    listed = _call(amdsmi.amdsmi_get_gpu_process_list, handle) or []
    processes: list[GpuProcess] = []
    for entry in listed:
        # ROCm 6.1 and later list dicts; earlier releases list handles to look up.
        info = entry if isinstance(entry, dict) else _call(
            amdsmi.amdsmi_get_gpu_process_info, handle, entry
        )
        if isinstance(info, dict) and isinstance(info.get("pid"), int):
            memory = _opt_int(info.get("mem"))
            usage = info.get("engine_usage")
            engine = _opt_int(usage.get("gfx")) if isinstance(usage, dict) else None
            processes.append(GpuProcess(pid=info["pid"], used_memory_bytes=memory,
                                        engine_ns=engine))
    gfx = activity.get("gfx_activity") if isinstance(activity, dict) else None
    return GpuDevice(
        index=index,
        name=name if isinstance(name, str) else None,
        utilization_percent=_opt_float(gfx),
        processes=tuple(processes),
    )

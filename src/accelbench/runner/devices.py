"""Device-specific pieces of a case context: the clock, the cache flush, clean-up.

Only the worker process calls these; they import torch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelbench.core.context import CaseContext, DistInfo
from accelbench.core.device import DeviceInfo
from accelbench.core.timing import (
    SOLO,
    Clock,
    Coordinator,
    DeviceEventClock,
    PerfCounterClock,
    SynchronizingClock,
    TimingPolicy,
)
from accelbench.core.untrusted import is_decimal

_MIB = 1 << 20


def make_context(
    device: DeviceInfo,
    policy: TimingPolicy,
    dist: DistInfo | None = None,
    coordinator: Coordinator = SOLO,
) -> CaseContext:
    flush = make_flush(device) if policy.flush_cache else None
    return CaseContext(device=device, clock=make_clock(device), policy=policy, flush=flush,
                       dist=dist, coordinator=coordinator)


def make_clock(device: DeviceInfo) -> Clock:
    import torch

    if device.type == "cuda":  # CUDA and ROCm alike: HIP events behind the same API
        torch.cuda.set_device(device.index or 0)
        return DeviceEventClock(torch.device(device.torch_device))
    if device.type == "xpu":
        return SynchronizingClock(torch.xpu.synchronize)
    if device.type == "mps":
        return SynchronizingClock(torch.mps.synchronize)
    return PerfCounterClock()


def make_flush(device: DeviceInfo) -> Callable[[], Any]:
    """Overwrite a buffer larger than the last-level cache before each sample."""
    import torch

    if device.type == "cpu":
        size = max(2 * cpu_llc_bytes(), 64 * _MIB)
    else:
        # Twice L2, and at least 512 MiB: MI300's Infinity Cache sits behind L2.
        size = max(2 * (device.l2_cache_bytes or 0), 512 * _MIB)
    buffer = torch.empty(size // 4, dtype=torch.float32, device=device.torch_device)
    return lambda: buffer.fill_(1.0)


def cpu_llc_bytes() -> int:
    """The largest cache CPU 0 sees, in bytes (32 MiB where sysfs does not say)."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if is_decimal(digits):
            best = max(best, int(digits) * scale)
    return best or 32 * _MIB


def release(device: DeviceInfo) -> None:
    """Give memory back between cases, so one case's allocations do not starve the next."""
    if device.type == "cuda":
        import gc

        import torch

        # A full collection costs a fraction of a second with torch loaded: worth it
        # only where cached device memory is handed back afterwards.
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

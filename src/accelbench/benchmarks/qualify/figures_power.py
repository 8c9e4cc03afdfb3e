"""The `power` figure: the board power each GPU sustains under a GEMM load (the CPU
package's, from RAPL, on the CPU).

Every GPU runs a bf16 GEMM back to back for `seconds`, all at once (a node's power is
drawn together), while the telemetry sampler (env.telemetry) reads each GPU's power
through NVML, amdsmi or the amd-smi CLI. The first third of the load is its warm-up (the
clocks and the power limit's controller settle); a GPU's value is the 90th percentile of
its readings after it. On the CPU the readings are the package energy counter's watts
between readings.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from accelbench.benchmarks.qualify.figures_base import Reading, cpu_threads, gpu_indices
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseSkipped
from accelbench.core.telemetry import CPU_ENERGY_J, GFX_CLOCK_MHZ, POWER_W, THROTTLE, Series

PERCENTILE = 90
WARMUP_SHARE = 1 / 3
GPU_N = 8192  # the GEMM of the load (the stress benchmark's size class)
CPU_N = 1024


def interval_for(seconds: float) -> float:
    """Readings every 50 ms for a short load, up to every 250 ms for a long one."""
    return min(0.25, max(0.05, seconds / 200))


def percentile(values: Sequence[float], pct: float) -> float:
    """The `pct` percentile, linearly interpolated between the closest readings."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def sustained(t: Sequence[float], watts: Sequence[float | None], start: float,
              end: float) -> tuple[float, dict[str, Any]] | None:
    """(the 90th percentile of the readings in the last two thirds of [start, end],
    what they were); None without a reading there."""
    settled = start + (end - start) * WARMUP_SHARE
    kept = [w for at, w in zip(t, watts, strict=True)
            if w is not None and settled <= at <= end]
    if not kept:
        return None
    return percentile(kept, PERCENTILE), {"max": max(kept), "mean": statistics.fmean(kept),
                                          "readings": len(kept), "warmup_s": settled - start}


def watts_from_energy(t: Sequence[float], joules: Sequence[float | None],
                      wrap_j: float | None = None) -> tuple[list[float], list[float | None]]:
    """The power between consecutive readings of an energy counter, at the later one's
    time (a counter that wrapped is unwrapped where its range is known)."""
    times: list[float] = []
    watts: list[float | None] = []
    last: tuple[float, float] | None = None
    for at, energy in zip(t, joules, strict=True):
        if energy is None:
            continue
        if last is not None and at > last[0]:
            delta = energy - last[1]
            if delta < 0 and wrap_j:
                delta += wrap_j
            times.append(at)
            watts.append(delta / (at - last[0]) if delta >= 0 else None)
        last = (at, energy)
    return times, watts


def throttle_seen(series: Series, start: float) -> dict[str, Any]:
    """The clocks and the throttle reasons seen after `start` (the settled load)."""
    kept = [i for i, at in enumerate(series.t) if at >= start]
    clocks = [c for i in kept if (c := series.channel(GFX_CLOCK_MHZ)[i]) is not None]
    bits = 0
    readings = 0
    for i in kept:
        value = series.channel(THROTTLE)[i]
        if value is not None:
            readings += 1
            bits |= int(value)
    reasons = [series.throttle_names.get(b, f"throttle bit {b}")
               for b in range(bits.bit_length()) if bits >> b & 1]
    return {"gfx_clock_mhz_median": statistics.median(clocks) if clocks else None,
            "gfx_clock_mhz_min": min(clocks) if clocks else None,
            "throttle_readings": readings, "throttle_reasons": reasons}


def power(ctx: CaseContext, figure: str, seconds: float, size_mib: float | None) -> Reading:
    if ctx.device.type == "cuda":
        return _gpu_power(ctx, figure, seconds)
    return _cpu_power(ctx, figure, seconds)


def _gpu_power(ctx: CaseContext, figure: str, seconds: float) -> Reading:
    import torch

    from accelbench.benchmarks.micro.gemm import make_operands
    from accelbench.core.dtypes import unsupported_reason
    from accelbench.env.telemetry import TelemetrySampler, open_sources, vendor_index

    devices = gpu_indices(ctx)
    interval = interval_for(seconds)
    samplers: dict[int, Any] = {}
    missing: dict[str, str] = {}
    for index in devices:
        sources, why = open_sources("cuda", vendor_index(index), include=(
            "nvml", "amdsmi", "amd-smi"))
        if sources:
            samplers[index] = TelemetrySampler(sources, why, interval)
        else:
            missing[f"gpu{index}"] = "; ".join(f"{k}: {v}" for k, v in why.items())
    if not samplers:
        raise CaseSkipped("no GPU power reading: " + "; ".join(
            f"{k}: {v}" for k, v in missing.items()))
    dtype = "fp16" if unsupported_reason(ctx.device, "bf16") else "bf16"
    loads = []
    for index in devices:
        with torch.cuda.device(index):
            loads.append(make_operands(torch, torch.device(f"cuda:{index}"), dtype, GPU_N,
                                       GPU_N, GPU_N, 1, 0).call)

    def sync() -> None:
        for index in devices:
            torch.cuda.synchronize(index)

    for sampler in samplers.values():
        sampler.start()
    start = end = time.perf_counter()
    try:
        start, end, calls = _load(loads, sync, seconds)
    finally:
        for sampler in samplers.values():
            sampler.mark_window(start, end)
        series = {i: s.stop() for i, s in samplers.items()}
    if ctx.on_timed is not None:
        ctx.on_timed(start, end)
    values: dict[str, float] = {}
    samples: dict[str, tuple[float, ...]] = {}
    seen: dict[str, Any] = {}
    for index, s in series.items():
        began, ended = s.window or (0.0, end - start)
        found = sustained(s.t, s.channel(POWER_W), began, ended)
        if found is None:
            missing[f"gpu{index}"] = "no power reading during the load"
            continue
        subject = f"gpu{index}"
        values[subject] = found[0]
        samples[subject] = tuple(w for at, w in zip(s.t, s.channel(POWER_W), strict=True)
                                 if w is not None and began <= at <= ended)
        seen[subject] = {**found[1], **throttle_seen(s, began + (ended - began) * WARMUP_SHARE),
                         "sources": list(s.sources)}
    if not values:
        raise CaseSkipped("no GPU power reading during the load: " + "; ".join(
            f"{k}: {v}" for k, v in missing.items()))
    return Reading(figure, values, samples, details={
        "load": f"{dtype} GEMM {GPU_N}^3 back to back on every GPU at once",
        "load_s": end - start, "calls": calls, "interval_s": interval,
        "derived": f"p{PERCENTILE} of the readings after the first third of the load",
        "per_gpu": seen, "missing": missing})


def _load(calls: Sequence[Callable[[], Any]], sync: Callable[[], None], seconds: float
          ) -> tuple[float, float, int]:
    """Each call in turn until `seconds` have passed, synchronising every few rounds so
    that no more than a round or two is queued past the end. (start, end, rounds)."""
    start = time.perf_counter()
    rounds = 0
    while True:
        for call in calls:
            call()
        rounds += 1
        if rounds % 4 == 0:
            sync()
            if time.perf_counter() - start >= seconds:
                break
    return start, time.perf_counter(), rounds


def _cpu_power(ctx: CaseContext, figure: str, seconds: float) -> Reading:
    import torch

    from accelbench.env.telemetry import TelemetrySampler
    from accelbench.env.telemetry.host import HostSource

    host = HostSource()
    if "rapl" in host.missing:
        raise CaseSkipped(f"no CPU power reading: {host.missing['rapl']}")
    sampler = TelemetrySampler([host], host.missing, interval_for(seconds))
    a = torch.rand(CPU_N, CPU_N)
    b = torch.rand(CPU_N, CPU_N)
    out = torch.empty(CPU_N, CPU_N)
    sampler.start()
    start = end = time.perf_counter()
    try:
        start, end, calls = _load([lambda: torch.matmul(a, b, out=out)], lambda: None, seconds)
    finally:
        sampler.mark_window(start, end)
        series = sampler.stop()
    if ctx.on_timed is not None:
        ctx.on_timed(start, end)
    began, ended = series.window or (0.0, end - start)
    times, watts = watts_from_energy(series.t, series.channel(CPU_ENERGY_J),
                                     series.wrap_j.get(CPU_ENERGY_J))
    found = sustained(times, watts, began, ended)
    if found is None:
        raise CaseSkipped("no CPU power reading during the load: the package energy "
                          "counter did not advance")
    kept = tuple(w for w in watts if w is not None)
    return Reading(figure, {"cpu": found[0]}, {"cpu": kept}, details={
        "load": f"fp32 GEMM {CPU_N}^3 back to back", "load_s": end - start,
        "calls": calls, "source": "RAPL package energy", **found[1],
        "derived": f"p{PERCENTILE} of the readings after the first third of the load"},
        cores=cpu_threads())

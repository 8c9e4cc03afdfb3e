"""Kernel launch statistics: how many launches, what each costs the CPU, how long
the device took to start the kernel.

A launch (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, hipLaunchKernel,
hipExtModuleLaunchKernel, cudaGraphLaunch, ...) is linked to the (first) kernel it
started by the correlation id both events carry, or else by the `ac2g` flow event
between them. The delay is
measured as HolisticTraceAnalysis does: from the end of the launch call to the start of
the kernel, never below zero.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from accelbench.profile.categories import is_kernel_launch
from accelbench.profile.operators import US
from accelbench.profile.trace import Event, Trace


def launch_stats(trace: Trace, steps: int) -> dict[str, Any] | None:
    """None when the trace recorded no kernel launch (a CPU-only trace)."""
    launches = [r for r in trace.runtime if is_kernel_launch(r.name)]
    if not launches:
        return None
    linked = link(trace, launches)
    kernels = sum(1 for e in trace.device if e.cat == "kernel")
    per = max(steps, 1)
    return {
        "launches": len(launches),
        "launches_per_step": len(launches) / per,
        "kernels": kernels,
        "kernels_per_step": kernels / per,
        "linked": len(linked),
        "cpu_overhead_s": describe([r.dur * US for r in launches]),
        "launch_delay_s": describe([max(0.0, k.ts - r.end) * US for r, k in linked]),
    }


def link(trace: Trace, launches: Sequence[Event]) -> list[tuple[Event, Event]]:
    """(launch, device activity) pairs: by correlation id, else by flow event."""
    by_correlation: dict[int, Event] = {}
    for event in trace.device:  # sorted by start: a graph launch's first kernel wins
        if event.correlation is not None:
            by_correlation.setdefault(event.correlation, event)
    by_flow = _flow_targets(trace)
    pairs = []
    for launch in launches:
        target = by_correlation.get(launch.correlation) if launch.correlation is not None \
            else None
        if target is None:
            target = by_flow.get((launch.pid, launch.tid, launch.ts))
        if target is not None:
            pairs.append((launch, target))
    return pairs


def _flow_targets(trace: Trace) -> dict[tuple[object, object, float], Event]:
    """Flow start (thread and time of the runtime call) -> the device event it points to."""
    starts: dict[object, tuple[object, object, float]] = {}
    ends: dict[object, tuple[object, object, float]] = {}
    for flow in trace.flows:
        try:
            where = (flow.get("pid"), flow.get("tid"), float(flow["ts"]))
        except (KeyError, TypeError, ValueError):
            continue
        (starts if flow.get("ph") == "s" else ends)[flow.get("id")] = where
    device = {(e.pid, e.tid, e.ts): e for e in trace.device}
    out = {}
    for flow_id, start in starts.items():
        target = device.get(ends.get(flow_id))  # type: ignore[arg-type]
        if target is not None:
            out[start] = target
    return out


def describe(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "max": max(values),
        "min": min(values),
    }

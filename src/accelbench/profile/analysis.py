"""The analysis of one profiler trace: where the time of the profiled steps went.

`analyze` is a pure function of the trace's events; its result is plain JSON, stored
with the run and read back by reports without torch.

The window is the profiled steps: from the start of the first `ProfilerStep#N` to the
end of the last, extended to the end of the device work launched in them. With device
activity in the trace the breakdown is of device time, per device: each instant of
the window counts once, as compute if any compute kernel runs, else communication if a
collective runs, else memory if a copy or fill runs, else idle; so the parts add up to
the window. Without device activity (a CPU-only run) the same breakdown is made of
the CPU operators' self time on all threads, idle then being time outside any operator.

Format history of the result (FORMAT_VERSION):
  1: first version.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accelbench.profile import intervals
from accelbench.profile.categories import (
    COMMUNICATION,
    COMPUTE,
    PARTS,
    PRIORITY,
    platform_of,
)
from accelbench.profile.launches import describe, launch_stats
from accelbench.profile.operators import (
    US,
    cpu_spans_by_category,
    device_spans_by_category,
    self_times,
    top_kernels,
    top_operators,
)
from accelbench.profile.trace import Event, Trace, load

FORMAT_VERSION = 1
TOP = 10


def analyze_file(path: str | os.PathLike[str], top: int = TOP) -> dict[str, Any]:
    """Analyse a trace file (JSON or gzipped JSON); raises TraceError if unreadable."""
    return {**analyze(load(path), top), "trace_file": Path(path).name}


def analyze(trace: Trace, top: int = TOP) -> dict[str, Any]:
    start, end = _window(trace)
    selves = self_times(trace.cpu_ops)
    device = [e for e in trace.device if e.end > start and e.ts < end]
    steps = len(trace.steps)
    result: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "platform": platform_of({r.name for r in trace.runtime}) or "cpu",
        "basis": "device" if device else "cpu",
        "window": {
            "start_us": start,
            "duration_s": (end - start) * US,
            "steps": steps,
            "step_numbers": trace.step_numbers,
            "step_s": describe([s.dur * US for s in trace.steps]),
        },
        "top_operators": top_operators(selves, top),
        "top_kernels": top_kernels(device, top),
        "launches": launch_stats(trace, steps),
        "memory": memory_peaks(trace.memory, bool(trace.meta.get("profile_memory"))),
    }
    window = (start, end)
    if device:
        by_device: dict[object, list[Event]] = defaultdict(list)
        for event in device:
            by_device[event.args.get("device", event.pid)].append(event)
        per_device = [
            {"device": key, **_breakdown(window, device_spans_by_category(events))}
            for key, events in sorted(by_device.items(), key=lambda kv: str(kv[0]))
        ]
        result["devices"] = per_device
        result["breakdown"] = _total(per_device)
        overlaps = [_overlap(window, device_spans_by_category(events))
                    for events in by_device.values()]
    else:
        spans = cpu_spans_by_category(selves)
        result["breakdown"] = _breakdown(window, spans)
        overlaps = [_overlap(window, spans)]
    result["overlap"] = _sum_overlaps(overlaps)
    return result


def _window(trace: Trace) -> tuple[float, float]:
    if trace.steps:
        start = trace.steps[0].ts
        end = max(s.end for s in trace.steps)
        launched = [e.end for e in trace.device if start <= e.ts < end]
        return start, max([end, *launched])
    events = [*trace.cpu_ops, *trace.device]
    if not events:
        return 0.0, 0.0
    return min(e.ts for e in events), max(e.end for e in events)


def _breakdown(window: intervals.Span, spans: Mapping[str, Sequence[intervals.Span]]
               ) -> dict[str, Any]:
    parts = intervals.partition(window, spans, PRIORITY)
    total = window[1] - window[0]
    return {
        "total_s": total * US,
        "parts_s": {p: parts[p] * US for p in PARTS},
        "shares": {p: parts[p] / total if total > 0 else 0.0 for p in PARTS},
    }


def _total(per_device: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several devices add up in device-seconds."""
    if len(per_device) == 1:
        return {k: v for k, v in per_device[0].items() if k != "device"}
    total = sum(d["total_s"] for d in per_device)
    parts = {p: sum(d["parts_s"][p] for d in per_device) for p in PARTS}
    return {"total_s": total, "parts_s": parts,
            "shares": {p: parts[p] / total if total > 0 else 0.0 for p in PARTS}}


def _overlap(window: intervals.Span, spans: Mapping[str, Sequence[intervals.Span]]
             ) -> tuple[float, float]:
    """(communication time, the part of it during which compute ran), microseconds."""
    comm = intervals.union(intervals.clip(spans.get(COMMUNICATION, ()), window))
    comp = intervals.union(intervals.clip(spans.get(COMPUTE, ()), window))
    return intervals.length(comm), intervals.length(intervals.intersect(comm, comp))


def _sum_overlaps(overlaps: Sequence[tuple[float, float]]) -> dict[str, float] | None:
    """None when nothing communicated; `ratio` is HolisticTraceAnalysis's overlap share."""
    comm = sum(c for c, _ in overlaps)
    if comm <= 0:
        return None
    overlapped = sum(o for _, o in overlaps)
    return {
        "communication_s": comm * US,
        "overlapped_s": overlapped * US,
        "exposed_s": (comm - overlapped) * US,
        "ratio": overlapped / comm,
    }


def memory_peaks(events: Sequence[Mapping[str, Any]], profiled: bool = False
                 ) -> dict[str, Any] | None:
    """Peak allocator totals per device from `[memory]` events; None when memory was
    not profiled, empty peaks when it was but nothing was allocated in the window."""
    allocated: dict[str, int] = {}
    reserved: dict[str, int] = {}
    for event in events:
        kind, index = event.get("Device Type"), event.get("Device Id")
        device = "cpu" if kind == 0 else f"cuda:{index}" if kind == 1 else f"{kind}:{index}"
        for key, peaks in (("Total Allocated", allocated), ("Total Reserved", reserved)):
            value = event.get(key)
            if isinstance(value, int | float):
                peaks[device] = max(peaks.get(device, 0), int(value))
    if not allocated and not profiled:
        return None
    return {"peak_allocated_bytes": allocated, "peak_reserved_bytes": reserved}

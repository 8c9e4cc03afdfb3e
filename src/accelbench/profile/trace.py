"""Reading a PyTorch profiler (Kineto) trace: Chrome-trace JSON, optionally gzipped.

Kineto writes one JSON object whose `traceEvents` list holds complete events
(`"ph": "X"`, times in microseconds), instant events such as `[memory]`, flow events
(`"ac2g"`, runtime call -> device activity) and metadata. What matters here:

- `user_annotation` events on the CPU named `ProfilerStep#N`: the profiled steps;
- `cpu_op` events: the operators (aten::mm, ...), nested on each thread;
- `cuda_runtime` / `cuda_driver` events: runtime calls (cudaLaunchKernel; ROCm builds
  record hipLaunchKernel and friends under the same categories);
- `kernel`, `gpu_memcpy`, `gpu_memset` events: device activity, one row per stream.
  `gpu_user_annotation` rows mirror annotations on the device and are not activity.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime"})


class TraceError(ValueError):
    """The file is not a readable profiler trace."""


@dataclass(frozen=True)
class Event:
    """One complete event; times in microseconds, as in the trace."""

    name: str
    cat: str
    pid: object  # as the trace has them: numbers, or names such as "Spans"
    tid: object
    ts: float
    dur: float
    args: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def correlation(self) -> int | None:
        value = self.args.get("correlation")
        return value if isinstance(value, int) else None


@dataclass
class Trace:
    """The events of one trace file, sorted by start time within each list."""

    steps: list[Event]
    cpu_ops: list[Event]
    runtime: list[Event]
    device: list[Event]
    memory: list[dict[str, Any]]  # `[memory]` instant events (their args and ts)
    flows: list[dict[str, Any]]  # `ac2g` flow events
    meta: dict[str, Any]  # the trace's top-level fields, events left out

    @property
    def step_numbers(self) -> list[int]:
        return [int(STEP_NAME.match(s.name).group(1)) for s in self.steps]  # type: ignore[union-attr]


def read_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The trace file's JSON object; gzip is recognised by its magic bytes."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except OSError as e:
        raise TraceError(f"cannot read trace {path}: {e.strerror or e}") from None
    except (ValueError, EOFError) as e:
        raise TraceError(f"{path} is not a profiler trace: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError(f"{path} is not a profiler trace: no traceEvents list")
    return data


def parse(data: dict[str, Any]) -> Trace:
    trace = Trace([], [], [], [], [], [], {k: v for k, v in data.items() if k != "traceEvents"})
    for raw in data.get("traceEvents", ()):
        if not isinstance(raw, dict):
            continue
        phase, cat, name = raw.get("ph"), raw.get("cat", ""), raw.get("name", "")
        if phase == "X":
            event = _complete(raw)
            if event is None:
                continue
            if cat == "cpu_op":
                trace.cpu_ops.append(event)
            elif cat in DEVICE_CATEGORIES:
                trace.device.append(event)
            elif cat in RUNTIME_CATEGORIES:
                trace.runtime.append(event)
            elif cat == "user_annotation" and STEP_NAME.match(name):
                trace.steps.append(event)
        elif phase == "i" and name == "[memory]" and isinstance(raw.get("args"), dict):
            trace.memory.append({"ts": raw.get("ts"), **raw["args"]})
        elif phase in ("s", "f") and cat == "ac2g":
            trace.flows.append(raw)
    for events in (trace.steps, trace.cpu_ops, trace.runtime, trace.device):
        events.sort(key=lambda e: (e.ts, -e.dur))
    return trace


def load(path: str | os.PathLike[str]) -> Trace:
    return parse(read_json(path))


def _complete(raw: dict[str, Any]) -> Event | None:
    try:
        ts, dur = float(raw["ts"]), float(raw.get("dur", 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    args = raw.get("args")
    return Event(str(raw.get("name", "")), str(raw.get("cat", "")), raw.get("pid"),
                 raw.get("tid"), ts, max(dur, 0.0), args if isinstance(args, dict) else {})

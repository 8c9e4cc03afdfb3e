"""Running a callable under the PyTorch profiler (Kineto) with a step schedule.

The first `wait` steps run without the
profiler (start-up: allocation, autotuning, lazy initialisation), the next `warmup`
steps run with it but are discarded (the profiler's own start-up), and the `active`
steps are recorded. The trace is written by `tensorboard_trace_handler`, gzipped, as
`<dir>/<worker>.<timestamp>.pt.trace.json.gz`: the layout TensorBoard's profiler view
reads (`tensorboard --logdir` on the parent of `<dir>`), and a file Perfetto opens.

Each step is one call of the operation, timed by the case's own clock as the timing
core times a sample (on GPUs that clock waits for the device at the end of the call), so
a step's device work lies inside its `ProfilerStep#N` annotation, and benchmarks that
wrap the clock (collectives keep every rank's own times through it) work unchanged.

Kineto logs to file descriptor 2 from C++: a "profiler_start"/"profiler_stop" pair on
every run, and on a host without a GPU runtime "gpuGetDeviceCount failed", which says
nothing about a CPU profile. Those lines are dropped (`kineto_noise`); whatever else it
or the benchmark wrote there is passed on once the profile is over.
"""

from __future__ import annotations

import contextlib
import glob
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core.timing import Clock

TRACE_SUFFIX = ".pt.trace.json.gz"


@dataclass(frozen=True)
class Schedule:
    """The profiler's step schedule, and whether to record memory allocations."""

    wait: int = 1
    warmup: int = 2
    active: int = 5
    memory: bool = False

    def __post_init__(self) -> None:
        if self.wait < 0 or self.warmup < 0:
            raise ValueError("wait and warmup steps cannot be negative")
        if self.active < 1:
            raise ValueError("at least one active step is needed")

    @property
    def total(self) -> int:
        return self.wait + self.warmup + self.active

    @property
    def first_active(self) -> int:
        """The number N of the first recorded `ProfilerStep#N`."""
        return self.wait + self.warmup

    def to_dict(self) -> dict[str, Any]:
        return {"wait": self.wait, "warmup": self.warmup, "active": self.active,
                "memory": self.memory}


@dataclass(frozen=True)
class Capture:
    """What one profiled run of a callable left: its trace files and step times."""

    trace_paths: tuple[Path, ...]
    step_seconds: tuple[float, ...]  # each active step, profiler overhead included
    schedule: Schedule


def profile_steps(
    fn: Callable[[], Any],
    clock: Clock,
    device_type: str,
    schedule: Schedule,
    out_dir: Path,
    worker_name: str | None = None,
) -> Capture:
    """Call fn once per step under the profiler; see the module docstring."""
    import torch
    from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler
    from torch.profiler import schedule as step_schedule

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Named here, as torch would name it, so that only this process's files are ours
    # when several ranks write into one folder.
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
    pattern = f"{glob.escape(worker)}.*{TRACE_SUFFIX}"
    before = set(out_dir.glob(pattern))
    activities = [ProfilerActivity.CPU]
    device_activity = getattr(ProfilerActivity, {"cuda": "CUDA", "xpu": "XPU"}.get(
        device_type, ""), None)
    if device_activity is not None and device_activity in torch.profiler.supported_activities():
        activities.append(device_activity)
    seconds: list[float] = []
    with _kineto_log_filtered(device_type), profile(
        activities=activities,
        schedule=step_schedule(wait=schedule.wait, warmup=schedule.warmup,
                               active=schedule.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(out_dir), worker_name=worker,
                                                 use_gzip=True),
        record_shapes=True,
        profile_memory=schedule.memory,
    ) as prof:
        for _ in range(schedule.total):
            seconds.append(clock.time(fn, 1))
            prof.step()
    paths = tuple(sorted(set(out_dir.glob(pattern)) - before))
    return Capture(paths, tuple(seconds[schedule.first_active:]), schedule)


# Kineto's routine lines: its start/stop markers, and a GPU runtime it did not find.
_ROUTINE = ("] profiler_start", "] profiler_stop")
_NO_GPU_RUNTIME = "gpuGetDeviceCount failed"


def kineto_noise(line: str, device_type: str) -> bool:
    """Whether a line Kineto wrote to stderr says nothing about this profile."""
    if any(marker in line for marker in _ROUTINE):
        return True
    return device_type == "cpu" and _NO_GPU_RUNTIME in line


@contextlib.contextmanager
def _kineto_log_filtered(device_type: str) -> Iterator[None]:
    """File descriptor 2 redirected for the block, and what was written to it passed on
    afterwards without Kineto's noise (see the module's docstring)."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().decode("utf-8", "replace").splitlines()
                    if not kineto_noise(line, device_type)]
            if kept:
                print("\n".join(kept), file=sys.stderr)

"""A case context whose `time` profiles the operation instead of sampling it.

Every benchmark hands its operation to `ctx.time` once; that is the one place it runs
repeatedly, so profiling any benchmark needs no change to the benchmark. The
samples this context returns are the active steps' times, taken under the profiler:
they carry its overhead and are not figures to compare with `accelbench run`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from accelbench.core.context import CaseContext
from accelbench.core.timing import Timing
from accelbench.profile.capture import Capture, Schedule, profile_steps

STOP_PROFILED = "profile schedule"


# A subclass only to replace `time`: everything else a benchmark reads (device,
# peaks, clock, policy, its place in a distributed job) must stay what a normal run
# gives it. `captures` is shared by copies a benchmark makes with dataclasses.replace.
@dataclass
class ProfilingContext(CaseContext):
    schedule: Schedule = field(default_factory=Schedule)
    out_dir: Path = field(default_factory=Path)
    worker_name: str | None = None
    captures: list[Capture] = field(default_factory=list)

    def time(self, fn: Callable[[], Any]) -> Timing:
        """Profile the first operation handed over; time any later one as usual."""
        if self.captures:
            return super().time(fn)
        capture = profile_steps(fn, self.clock, self.device.type, self.schedule, self.out_dir,
                                self.worker_name)
        self.captures.append(capture)
        return Timing(
            samples=capture.step_seconds,
            number=1,
            warmup_calls=self.schedule.wait + self.schedule.warmup,
            stop_reason=STOP_PROFILED,
            confidence=self.policy.confidence,
        )


def profiling_context(base: CaseContext, schedule: Schedule, out_dir: Path,
                      worker_name: str | None = None) -> ProfilingContext:
    """The profiling twin of a context made for a normal run."""
    same = {f.name: getattr(base, f.name) for f in fields(CaseContext)}
    return ProfilingContext(**same, schedule=schedule, out_dir=Path(out_dir),
                            worker_name=worker_name)

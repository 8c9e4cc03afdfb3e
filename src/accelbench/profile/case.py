"""Profile one planned case in this process: every outcome becomes a Measurement.

`runner.worker.execute_case` runs it (a skipped or failed case is recorded with its
reason, never raised), with the profiling context in place of the sampling one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from accelbench.core.context import CaseContext, DistInfo
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseResult, Measurement
from accelbench.core.timing import SOLO, Coordinator, TimingPolicy
from accelbench.profile.capture import Schedule
from accelbench.profile.context import ProfilingContext, profiling_context
from accelbench.runner.plan import PlannedCase

PROFILED_WARNING = (
    "profiled: times were taken under the profiler and carry its overhead; "
    "use `accelbench run` for figures to compare"
)


@dataclass(frozen=True)
class ProfiledCase:
    measurement: Measurement
    trace_paths: tuple[Path, ...]


PROFILE_POLICY = TimingPolicy(telemetry_interval=0.0)


def profile_case(
    planned: PlannedCase,
    device: DeviceInfo,
    schedule: Schedule,
    out_dir: Path,
    worker_name: str | None = None,
    dist: DistInfo | None = None,
    coordinator: Coordinator = SOLO,
) -> ProfiledCase:
    """Run the case's measure function with a profiling context; `dist` and
    `coordinator` place it in a distributed job as `execute_case` does."""
    from accelbench.runner.worker import execute_case

    profiled: list[ProfilingContext] = []

    def adapt(base: CaseContext) -> CaseContext:
        profiled.append(profiling_context(base, schedule, out_dir, worker_name))
        return profiled[0]

    def judge(ctx: CaseContext, result: CaseResult) -> tuple[str, ...]:
        if not profiled[0].captures:
            raise CaseFailed(f"{planned.benchmark.name} timed nothing through ctx.time, "
                             "so there was nothing to profile")
        return (PROFILED_WARNING,)

    # No telemetry under the profiler: its figures carry the profiler's overhead anyway,
    # and a sampling thread would run beside the profiler's own tracing threads.
    outcome = execute_case(planned, device, PROFILE_POLICY, dist, coordinator,
                           adapt=adapt, judge=judge)
    captures = profiled[0].captures if profiled else []
    traces = captures[0].trace_paths if captures else ()
    details = {**outcome.details, "profile": {**schedule.to_dict(),
                                              "trace_files": [str(p) for p in traces]}}
    return ProfiledCase(replace(outcome, details=details), traces)

"""Profile one planned case in this process: every outcome becomes a Measurement.

The same outcomes as `runner.worker.execute_case` (a skipped or failed case is
recorded with its reason, never raised), with the profiling context in place of the
sampling one.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from accelbench.core.context import DistInfo
from accelbench.core.measurement import (
    STATUS_FAILED,
    STATUS_SKIPPED,
    CaseFailed,
    CaseSkipped,
    Measurement,
    from_result,
    not_measured,
)
from accelbench.core.timing import SOLO, Coordinator, TimingPolicy
from accelbench.env.device import DeviceInfo
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
    from accelbench.runner.devices import make_context, release
    from accelbench.runner.worker import describe_error

    case = planned.case
    started = time.time()
    t0 = time.perf_counter()
    if device.type not in planned.benchmark.devices:
        reason = f"{planned.benchmark.name} does not run on {device.type} devices"
        return ProfiledCase(not_measured(case, STATUS_SKIPPED, reason, started, 0.0), ())
    ctx: ProfilingContext | None = None
    try:
        base = make_context(device, TimingPolicy(), dist, coordinator)
        ctx = profiling_context(base, schedule, out_dir, worker_name)
        result = planned.benchmark.load()(ctx, dict(planned.params))
        if not ctx.captures:
            raise CaseFailed(f"{planned.benchmark.name} timed nothing through ctx.time, "
                             "so there was nothing to profile")
        outcome = from_result(case, result, (PROFILED_WARNING,), started,
                              time.perf_counter() - t0)
    except CaseSkipped as exc:
        outcome = not_measured(case, STATUS_SKIPPED, str(exc), started, time.perf_counter() - t0)
    except CaseFailed as exc:
        outcome = not_measured(case, STATUS_FAILED, str(exc), started, time.perf_counter() - t0)
    except Exception as exc:  # any error in a case is that case's failure
        outcome = not_measured(case, STATUS_FAILED, describe_error(exc), started,
                               time.perf_counter() - t0,
                               {"traceback": traceback.format_exc(limit=20)})
    with contextlib.suppress(Exception):
        release(device)
    traces = ctx.captures[0].trace_paths if ctx is not None and ctx.captures else ()
    details = {**outcome.details, "profile": {**schedule.to_dict(),
                                              "trace_files": [str(p) for p in traces]}}
    return ProfiledCase(replace(outcome, details=details), traces)

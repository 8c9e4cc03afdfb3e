"""One `accelbench profile`: plan exactly one case, profile it in this process, analyse
the trace, and store the run, its measurement and the profile.

Checks that need no device come first, so bad input never creates a run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.core.measurement import STATUS_FAILED, Measurement
from accelbench.core.names import RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED
from accelbench.core.registry import Registry
from accelbench.errors import EXIT_CASE_FAILED, EXIT_OK, UserError
from accelbench.profile.capture import Schedule
from accelbench.runner.plan import (
    PlannedCase,
    Request,
    Suite,
    ValidRequest,
    expand,
    given_values,
    validate,
)
from accelbench.runner.recorder import RunRecorder

if TYPE_CHECKING:
    from accelbench.core.device import DeviceInfo
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.store import Store

SUITE = "profile"
# No suite grid applies: a profile is of the benchmark's defaults and the given values.
_NO_GRID = Suite(name=SUITE, description="one profiled case", timing={}, entries=())


@dataclass
class ProfileOutcome:
    run_id: str
    fingerprint: Fingerprint
    measurement: Measurement
    trace_dir: Path
    trace_paths: tuple[Path, ...] = ()
    analysis: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        failed = self.measurement.status == STATUS_FAILED or self.problems
        return RUN_FAILED if failed else RUN_COMPLETE

    @property
    def exit_code(self) -> int:
        return EXIT_CASE_FAILED if self.status == RUN_FAILED else EXIT_OK


def check_request(request: Request, registry: Registry) -> ValidRequest:
    """Everything checkable without a device: names, values, and exactly one case."""
    if len(request.benches) != 1:
        raise UserError("profile takes exactly one benchmark")
    valid = validate(dataclasses.replace(request, suite="quick"), registry)
    bench = registry.get(request.benches[0])
    grid = {name: tuple(str(v) for v in given_values(bench, name, texts))
            for name, texts in request.overrides.items() if bench.param(name) is not None}
    grid = {name: values for name, values in grid.items() if len(values) > 1}
    if len(request.dtypes) > 1:
        grid["dtype"] = request.dtypes
    if grid:
        shown = "; ".join(f"{k}={','.join(v)}" for k, v in grid.items())
        raise UserError(f"profile takes exactly one case, but {shown} make a grid: "
                        "give one value per parameter")
    return valid


def plan_one(valid: ValidRequest, device: DeviceInfo) -> PlannedCase:
    cases = expand(valid.request, _NO_GRID, valid.registry, device)
    if len(cases) != 1:
        raise UserError(f"profile takes exactly one case; the parameters give {len(cases)}")
    return cases[0]


def profile_session(
    valid: ValidRequest,
    store: Store,
    schedule: Schedule,
    output: Path | None = None,
    argv: Sequence[str] = (),
) -> ProfileOutcome:
    """Profile the one case of `valid` (from `check_request`); `output` is the traces'
    parent directory (default: `profiles/` beside the store), each run writing into
    `<output>/<run id>/`."""
    import os

    from accelbench.env.fingerprint import collect
    from accelbench.env.torch_floor import require_supported_torch
    from accelbench.profile.case import profile_case
    from accelbench.runner.worker_env import applied

    require_supported_torch()
    fingerprint = collect(valid.request.device)
    planned = plan_one(valid, fingerprint.device)
    env = planned.benchmark.environment(planned.params, fingerprint.device)
    recorder = RunRecorder(store, fingerprint, SUITE, argv)
    parent = Path(output) if output else default_output(store.location.files_dir)
    trace_dir = parent / recorder.run_id
    try:
        with applied(env.for_user(os.environ)):
            profiled = profile_case(planned, fingerprint.device, schedule, trace_dir)
        recorder.record(0, profiled.measurement)
        outcome = ProfileOutcome(recorder.run_id, fingerprint, profiled.measurement,
                                 trace_dir, profiled.trace_paths)
        if profiled.measurement.ok and not profiled.trace_paths:
            outcome.problems.append(f"the profiler wrote no trace into {trace_dir}")
        if profiled.trace_paths:
            add_analysis(outcome, store, planned, profiled.trace_paths[0])
    except KeyboardInterrupt:
        recorder.finish(RUN_INTERRUPTED)
        raise
    recorder.finish(outcome.status)
    return outcome


def add_analysis(outcome: ProfileOutcome, store: Store, planned: PlannedCase, trace: Path
                 ) -> None:
    """Analyse the trace and store the profile record with every trace of the outcome."""
    from accelbench.profile.analysis import FORMAT_VERSION, analyze_file
    from accelbench.profile.trace import TraceError

    try:
        outcome.analysis = analyze_file(trace)
    except TraceError as exc:
        outcome.problems.append(str(exc))
        outcome.analysis = {"format_version": FORMAT_VERSION, "error": str(exc)}
    store.add_profile(outcome.run_id, case_key=planned.case.key,
                      benchmark=planned.case.benchmark, label=planned.case.label,
                      trace_paths=[str(p) for p in outcome.trace_paths],
                      analysis=outcome.analysis)


def default_output(files_dir: Path) -> Path:
    """profiles/ in the store's folder (`StoreLocation.files_dir`)."""
    return Path(files_dir) / "profiles"

"""One `accelbench profile`: plan exactly one case, profile it (in this process, or on
every rank of a torchrun job), analyse the trace, and store the run, its measurement and
the profile, through the one run lifecycle (runner.session.conduct).

Checks that need no device come first, so bad input never creates a run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.core.measurement import STATUS_FAILED, Measurement
from accelbench.core.names import RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED
from accelbench.core.registry import Registry
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED, EXIT_OK, UserError
from accelbench.profile.capture import Schedule
from accelbench.runner.plan import PlannedCase, Suite, ValidRequest, expand, validate
from accelbench.runner.recorder import RunRecorder
from accelbench.runner.session import conduct, say_given_aside

if TYPE_CHECKING:
    from accelbench.core.context import DistInfo
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


def check_request(request: RunRequest, registry: Registry) -> ValidRequest:
    """Everything checkable without a device: names, values, and exactly one case."""
    if len(request.benches) != 1:
        raise UserError("profile takes exactly one benchmark")
    valid = validate(request, registry, _NO_GRID)
    grid = {name: tuple(str(v) for v in values)
            for name, values in valid.given[request.benches[0]].items() if len(values) > 1}
    if len(request.dtypes) > 1:
        grid["dtype"] = request.dtypes
    if grid:
        shown = "; ".join(f"{k}={','.join(v)}" for k, v in grid.items())
        raise UserError(f"profile takes exactly one case, but {shown} make a grid: "
                        "give one value per parameter")
    return valid


def plan_one(valid: ValidRequest, device: DeviceInfo) -> PlannedCase:
    cases = expand(valid, device)
    say_given_aside(valid, cases)
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
    """Profile the one case of `valid` (from `check_request`) in this process; `output`
    is the traces' parent directory (default: `profiles/` beside the store), each run
    writing into `<output>/<run id>/`."""
    executor = ProfileExecutor(valid, schedule, output)
    conduct(executor, lambda: store, valid.request, argv)
    assert executor.outcome is not None
    return executor.outcome


def profile_as_rank(
    valid: ValidRequest,
    schedule: Schedule,
    open_store: Callable[[], Store],
    output: Path | None = None,
    argv: Sequence[str] = (),
) -> ProfileOutcome | None:
    """`accelbench profile` on every rank of a torch.distributed job (under torchrun).

    Each rank profiles the same case on its own device and writes its own trace
    (`rank<N>.<timestamp>.pt.trace.json.gz`) into one folder per run, which rank 0
    names; rank 0 stores the run, its measurement (failed if any rank failed), the paths
    of all the ranks' traces and the analysis of its own trace. On a machine of its own,
    each node writes where the same --output path points there. Rank 0's outcome; None
    on the other ranks."""
    from accelbench.runner.lifeline import end_with_owner

    end_with_owner()  # started by `accelbench profile --nproc-per-node`: end with it
    if (valid.request.nproc_per_node or 1) != 1:
        raise UserError("already started by torchrun: leave out --nproc-per-node")
    executor = ProfileExecutor(valid, schedule, output, ranked=True)
    conduct(executor, open_store, valid.request, argv)
    return executor.outcome


class ProfileExecutor:
    """The one case, profiled in this process, or (`ranked`) on this rank of a
    torchrun job; `outcome` holds what the process that stores the run profiled."""

    def __init__(self, valid: ValidRequest, schedule: Schedule, output: Path | None = None,
                 ranked: bool = False) -> None:
        self.valid = valid
        self.schedule = schedule
        self.output = Path(output) if output else None
        self.ranked = ranked
        self.outcome: ProfileOutcome | None = None
        self._info: DistInfo | None = None
        self._backend = ""
        self._fingerprint: Fingerprint | None = None

    @property
    def stores(self) -> bool:
        return self._info is None or self._info.rank == 0

    def fingerprint(self) -> Fingerprint:
        from accelbench.env.fingerprint import collect
        from accelbench.env.torch_floor import require_supported_torch
        from accelbench.runner.distributed import join_as_rank

        request = self.valid.request
        if not self.ranked:
            require_supported_torch()
            self._fingerprint = collect(request.device)
            return self._fingerprint
        self._info, rank_device, self._backend = join_as_rank(
            self.valid.device, request.backend,
            self.valid.registry.get(request.benches[0]).timeout_s)
        self._fingerprint = collect(rank_device)
        return self._fingerprint

    def plan(self, fingerprint: Fingerprint) -> tuple[Fingerprint, list[PlannedCase]]:
        planned = plan_one(self.valid, fingerprint.device)
        if self._info is not None and planned.benchmark.distributed:
            planned = planned.on_world(self._info.world_size, self._backend)
        if fingerprint.device.type == "cpu":
            # The thread policy of `accelbench run`, so that a profile shows the case
            # `run` measures (all of a busy host's CPUs would stall at every barrier).
            planned, source = self._on_threads(planned)
            fingerprint = self._fingerprint = fingerprint.with_threads_source(source)
        return fingerprint, [planned]

    def _on_threads(self, planned: PlannedCase) -> tuple[PlannedCase, str]:
        from accelbench.runner import rank_session, session

        requested = self.valid.request.threads
        if self._info is None:
            cases, source = session.on_threads([planned], requested)
        else:
            cases, source = rank_session.on_threads([planned], requested,
                                                    self._info.local_world_size)
        return cases[0], source

    def execute(self, cases: Sequence[PlannedCase], recorder: RunRecorder | None
                ) -> str | None:
        assert self._fingerprint is not None
        planned = cases[0]
        if self._info is None:
            trace_dir = self._trace_dir(recorder)
            measurement, traces, own = self._profile_here(planned, trace_dir)
        else:
            trace_dir = self._shared_trace_dir(recorder)
            measurement, traces, own = self._profile_ranks(planned, trace_dir)
        if recorder is None:
            return None
        recorder.record(0, measurement)
        outcome = self.outcome = ProfileOutcome(recorder.run_id, self._fingerprint,
                                                measurement, trace_dir, traces)
        if self._info is None and measurement.ok and not own:
            outcome.problems.append(f"the profiler wrote no trace into {trace_dir}")
        if own:
            add_analysis(outcome, recorder.store, planned, own[0])
        return outcome.status

    def interrupted(self, stop: KeyboardInterrupt, recorder: RunRecorder) -> None:
        recorder.finish(RUN_INTERRUPTED)
        raise stop

    def close(self) -> None:
        if self._info is not None:
            from accelbench.runner.distributed import shutdown_group

            shutdown_group()

    def _trace_dir(self, recorder: RunRecorder | None) -> Path:
        assert recorder is not None
        parent = self.output or default_output(recorder.store.location.files_dir)
        return parent / recorder.run_id

    def _shared_trace_dir(self, recorder: RunRecorder | None) -> Path:
        """Rank 0 names the run's folder; every rank writes its trace there."""
        import torch.distributed as dist

        shared: list[Any] = [str(self._trace_dir(recorder)) if recorder else None]
        dist.broadcast_object_list(shared, src=0)
        return Path(shared[0])

    def _profile_here(self, planned: PlannedCase, trace_dir: Path) -> _Profiled:
        """The case profiled in this process, under the environment it asks for."""
        import os

        from accelbench.profile.case import profile_case
        from accelbench.runner.worker_env import applied

        assert self._fingerprint is not None
        device = self._fingerprint.device
        env = planned.benchmark.environment(planned.params, device)
        with applied(env.for_user(os.environ)):
            profiled = profile_case(planned, device, self.schedule, trace_dir)
        return profiled.measurement, profiled.trace_paths, profiled.trace_paths

    def _profile_ranks(self, planned: PlannedCase, trace_dir: Path) -> _Profiled:
        """This rank's profile of the case; on rank 0 the measurement is combined with
        every rank's outcome. With every rank's traces, and this rank's own."""
        import torch.distributed as dist

        from accelbench.profile.case import profile_case
        from accelbench.runner.distributed import GroupCoordinator, gather_outcomes
        from accelbench.runner.ranks import combine

        info = self._info
        assert info is not None and self._fingerprint is not None
        device = self._fingerprint.device
        coordinator = GroupCoordinator("cpu" if self._backend != "nccl"
                                       else device.torch_device)
        profiled = profile_case(planned, device, self.schedule, trace_dir,
                                f"rank{info.rank}", info, coordinator)
        m = profiled.measurement
        outcomes = gather_outcomes(m.status, m.reason)
        paths: list[Any] = [None] * info.world_size
        dist.all_gather_object(paths, [str(p) for p in profiled.trace_paths])
        every = tuple(Path(p) for rank in paths for p in rank)
        return combine(m, outcomes, info), every, profiled.trace_paths


# What one profile gave: the measurement, every rank's traces, and this process's own.
_Profiled = tuple[Measurement, tuple[Path, ...], tuple[Path, ...]]


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

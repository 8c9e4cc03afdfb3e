"""The worker: a separate process that imports torch and measures cases one at a time.

The supervisor sends requests over a pipe and waits with a timeout; whatever a case
does to this process (a crash in a vendor library, a hang, an out-of-memory) costs
that case only. `execute_case` is also usable in-process (tests, bench scripts).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from accelbench.core.context import CaseContext, DistInfo
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import (
    EXIT_CODE,
    STATUS_FAILED,
    STATUS_SKIPPED,
    CaseFailed,
    CaseResult,
    CaseSkipped,
    Measurement,
    from_result,
    not_measured,
)
from accelbench.core.timing import SOLO, Coordinator, TimingPolicy, noise_warnings
from accelbench.errors import UserError
from accelbench.runner import gpu_faults
from accelbench.runner.library_log import library_warnings
from accelbench.runner.messages import (
    CaseMeasured,
    FingerprintRead,
    MeasureCase,
    ReadFingerprint,
    Refused,
    Reply,
    Request,
    Stop,
)
from accelbench.runner.plan import PlannedCase

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from accelbench.env.host import HostReport, HostSampler
    from accelbench.env.telemetry import TelemetrySampler
    from accelbench.env.telemetry.remote import RemoteSampler
    from accelbench.env.tuning import CaseTuning


def execute_case(
    planned: PlannedCase,
    device: DeviceInfo,
    policy: TimingPolicy,
    dist: DistInfo | None = None,
    coordinator: Coordinator = SOLO,
    adapt: Callable[[CaseContext], CaseContext] | None = None,
    judge: Callable[[CaseContext, CaseResult], tuple[str, ...]] | None = None,
    siblings: bool = False,
) -> Measurement:
    """Measure one case; every outcome, failures included, becomes a Measurement.

    `adapt` replaces the context the measure function gets (profiling wraps it), and
    `judge` gives the result's warnings in place of the noise check; it may raise
    CaseFailed or CaseSkipped like the measure function.
    """
    from accelbench.runner.devices import release

    case = planned.case
    started = time.time()
    t0 = time.perf_counter()
    if device.type not in planned.benchmark.devices:
        return not_measured(case, STATUS_SKIPPED,
                            f"{planned.benchmark.name} does not run on {device.type} devices",
                            started, 0.0)
    faults = gpu_faults.watch(device)
    tuning = _tuning_before(device)
    sampler = _host_sampler(policy, dist, siblings)
    telemetry = _telemetry_sampler(policy, device)
    with library_warnings() as said:
        outcome = _outcome(planned, device, policy, dist, coordinator, adapt, judge, telemetry,
                           started, t0)
    if said:
        outcome = dataclasses.replace(outcome, details={**outcome.details,
                                                        "library_warnings": said})
    if tuning is not None:
        with contextlib.suppress(Exception):  # provenance must never cost the measurement
            outcome = dataclasses.replace(outcome, details={**outcome.details,
                                                            "tuning": tuning.finish()})
    if sampler is not None:
        outcome = with_host(outcome, sampler.stop())
    if telemetry is not None:
        series = telemetry.stop()
        outcome = dataclasses.replace(outcome,
                                      telemetry=(*outcome.telemetry, series.to_dict()))
    if faults is not None:
        kernel, address = faults
        with kernel:
            outcome = gpu_faults.judge(outcome, kernel.read(), address)
    # Outside the except blocks, so the exception's frames (and tensors) are gone.
    with contextlib.suppress(Exception):  # a broken device must not hide the failure
        release(device)
    return outcome


def _outcome(planned: PlannedCase, device: DeviceInfo, policy: TimingPolicy,
             dist: DistInfo | None, coordinator: Coordinator,
             adapt: Callable[[CaseContext], CaseContext] | None,
             judge: Callable[[CaseContext, CaseResult], tuple[str, ...]] | None,
             telemetry: TelemetrySampler | RemoteSampler | None, started: float, t0: float
             ) -> Measurement:
    """The case measured, or why not: every outcome becomes a Measurement."""
    from accelbench.runner.devices import make_context

    case = planned.case
    outcome: Measurement
    try:
        threads = _use_threads(device, planned.case.param_dict)
        ctx = make_context(device, policy, dist, coordinator)
        if telemetry is not None:
            ctx.on_timed = telemetry.mark_window
        if adapt is not None:
            ctx = adapt(ctx)
        result = planned.benchmark.measure(ctx, planned.params)
        if judge:
            notes = judge(ctx, result)
        else:
            notes = noise_warnings(result.timing, policy) if result.timing else ()
        outcome = from_result(case, result, notes, started, time.perf_counter() - t0)
        if threads is not None:
            outcome = dataclasses.replace(outcome, details={**outcome.details,
                                                            "threads_used": threads})
    except CaseSkipped as exc:
        outcome = not_measured(case, STATUS_SKIPPED, str(exc), started, time.perf_counter() - t0,
                               exc.details, exc.figures)
    except CaseFailed as exc:
        outcome = not_measured(case, STATUS_FAILED, str(exc), started, time.perf_counter() - t0,
                               exc.details, exc.figures)
    except UserError as exc:  # a user's error (an engine unreachable): its own exit code
        outcome = not_measured(case, STATUS_FAILED, str(exc), started, time.perf_counter() - t0,
                               {EXIT_CODE: exc.exit_code})
    except Exception as exc:  # any error in a case is that case's failure, not the run's
        outcome = not_measured(case, STATUS_FAILED, describe_error(exc), started,
                               time.perf_counter() - t0,
                               {"traceback": traceback.format_exc(limit=20)})
    return outcome


def _tuning_before(device: DeviceInfo) -> CaseTuning | None:
    """The GEMM/convolution tuning the case starts from (env.tuning), or None if unreadable."""
    try:
        import torch

        from accelbench.env.tuning import begin_case

        return begin_case(os.environ, torch, device.type, device.platform, device.index)
    except Exception:
        return None


def with_host(m: Measurement, report: HostReport) -> Measurement:
    """The measurement with what the host was doing beside it; a busy host is said."""
    warnings = m.warnings
    if report.contended:
        warnings = (*warnings, f"contended: {'; '.join(report.reasons)}")
    return dataclasses.replace(m, hosts=(*m.hosts, report.to_dict()), warnings=warnings)


def _host_sampler(policy: TimingPolicy, dist: DistInfo | None, siblings: bool = False
                  ) -> HostSampler | None:
    """A sampler of the host beside this case, whose own work is this process's; the
    supervisor (or torchrun's agent and the job's other ranks, or with `siblings` the
    partner that takes turns with this process) is not contention. It times the host's
    reference work just before and just after the case."""
    if policy.host_interval <= 0:
        return None
    from accelbench.env.host import HostProbe, HostSampler
    from accelbench.env.host.reference import reference_seconds

    ignore = {os.getppid()}
    if dist is not None or siblings:
        ignore |= _children(os.getppid())
    probe = HostProbe(include_children=True, ignore_pids=frozenset(ignore - {os.getpid()}),
                      reference=reference_seconds)
    return HostSampler(probe, interval_s=policy.host_interval).start()


def _telemetry_sampler(policy: TimingPolicy, device: DeviceInfo
                       ) -> TelemetrySampler | RemoteSampler | None:
    """The device's and the host's telemetry beside this case (env.telemetry), sampled
    from now on; None when the policy asks for none."""
    if policy.telemetry_interval <= 0:
        return None
    from accelbench.env.telemetry import SOURCE_NAMES, TelemetrySampler, vendor_index
    from accelbench.env.telemetry.remote import open_sampler

    index = vendor_index(device.index)
    known = _UNAVAILABLE.setdefault((device.type, index), {})
    wanted = [s for s in policy.telemetry_sources or SOURCE_NAMES if s not in known]
    try:
        # read by a process of its own: a reading in this one would hold the GIL from
        # the timed loop (env.telemetry.remote)
        sampler, missing = open_sampler(device.type, index, policy.telemetry_interval,
                                        include=wanted, missing=known)
    except Exception as exc:  # a vendor library that fails must not cost the case
        why = {"telemetry": f"could not open its sources: {describe_error(exc)}"}
        return TelemetrySampler([], {**known, **why}, policy.telemetry_interval).start()
    known.update({name: why for name, why in missing.items() if name in _VENDOR_SOURCES})
    return sampler


# Vendor sources that did not open in this worker process, per device, with why: they are
# not tried again for every case (an amd-smi that hangs would cost its timeout each time).
_VENDOR_SOURCES = ("nvml", "amdsmi", "amd-smi")
_UNAVAILABLE: dict[tuple[str, int | None], dict[str, str]] = {}


def _children(pid: int) -> set[int]:
    import psutil

    try:
        return {child.pid for child in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


def _use_threads(device: DeviceInfo, params: Mapping[str, Any]) -> int | None:
    """A CPU case runs on the number of threads its identity names."""
    threads = params.get("threads")
    if device.type != "cpu" or not isinstance(threads, int):
        return None
    import torch

    torch.set_num_threads(threads)
    return int(torch.get_num_threads())


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if type(exc).__name__ == "OutOfMemoryError" or "out of memory" in first.lower():
        return f"out of memory: {first}"[:500]
    return f"{type(exc).__name__}: {first}"[:500]


def worker_main(conn: Connection, owner: int | None = None,
                death_signal: bool = False, environ: Mapping[str, str] | None = None) -> None:
    """Entry point of the worker process: answer requests until told to stop.

    With `owner` (the supervisor's pid), the process ends as soon as the owner is gone:
    the pipe's end would tell it only after the case it is measuring, which may hang.
    `environ` is set first, before anything imports torch (see core.worker_env).
    """
    os.environ.update(environ or {})
    from accelbench.runner.lifeline import die_with_parent, exit_with_owner

    if death_signal:
        die_with_parent()
    if owner is not None:
        exit_with_owner(owner)
    # Ctrl-C is the supervisor's to handle; it stops this process itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if isinstance(message, Stop):
            return
        conn.send(answer(message))


def _taking_turns(message: MeasureCase) -> Measurement:
    """The case measured at the same time as its partner's, taking turns with it
    (runner.turns); the partner, a sibling process, is not contention."""
    from accelbench.runner.turns import Turns

    assert message.turns is not None
    turns = Turns(message.turns)
    try:
        turns.begin()
        measurement = execute_case(message.planned, message.device, message.policy,
                                   coordinator=turns, siblings=True)
    finally:
        turns.end()
    details = {**measurement.details, "turn_handovers": turns.handovers}
    if message.turns.cpus:
        details["pinned_cpus"] = list(message.turns.cpus)
    return dataclasses.replace(measurement, details=details)


def answer(message: Request) -> Reply:
    """The reply to one request; a user error becomes a Refused reply, not a crash."""
    from accelbench.errors import EXIT_INTERNAL, UserError

    try:
        if isinstance(message, ReadFingerprint):
            from accelbench.env.fingerprint import collect
            from accelbench.env.torch_floor import require_supported_torch

            require_supported_torch()
            return FingerprintRead(collect(message.device).to_dict())
        if isinstance(message, MeasureCase):
            if message.turns is not None:
                return CaseMeasured(_taking_turns(message).to_dict())
            measurement = execute_case(message.planned, message.device, message.policy)
            return CaseMeasured(measurement.to_dict())
        return Refused(EXIT_INTERNAL, f"worker: unknown request {type(message).__name__}")
    except UserError as exc:
        return Refused(exc.exit_code, str(exc))

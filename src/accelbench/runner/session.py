"""One `accelbench run`: find the device, plan, measure each case, store it.

The supervisor (this module) never imports torch: the worker process does the
measuring, and every finished case is written to the store before the next starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from accelbench.core.measurement import STATUS_FAILED, STATUS_SKIPPED, Measurement, not_measured
from accelbench.core.timing import TimingPolicy
from accelbench.env.device import DeviceInfo
from accelbench.errors import EXIT_INTERNAL, UserError
from accelbench.runner.messages import (
    CaseMeasured,
    FingerprintRead,
    MeasureCase,
    ReadFingerprint,
    Refused,
)
from accelbench.runner.plan import PlannedCase, ValidRequest, expand
from accelbench.runner.recorder import Listener, Outcome, RunRecorder, SilentListener
from accelbench.runner.supervisor import Worker, WorkerLost

if TYPE_CHECKING:
    from accelbench.store import Store

__all__ = ["Listener", "Outcome", "SilentListener", "run_session"]

FINGERPRINT_TIMEOUT_S = 300.0


def run_session(
    valid: ValidRequest,
    store: Store,
    argv: Sequence[str] = (),
    listener: Listener | None = None,
    case_timeout: float | None = None,
) -> Outcome:
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.distributed import check_backend

    request = valid.request
    slot = _WorkerSlot()
    try:
        fingerprint = Fingerprint.from_dict(_ask_fingerprint(slot.worker, request.device))
        device: DeviceInfo = fingerprint.device
        cases = expand(request, valid.suite, valid.registry, device,
                       fingerprint.data["devices"]["count"])
        backend = None
        if any(c.benchmark.distributed for c in cases):
            backend = check_backend(request.backend, device.type)
            cases = [c.on_world(c.ranks, backend) if c.benchmark.distributed else c
                     for c in cases]
        recorder = RunRecorder(store, fingerprint, request.suite, argv, listener)
        recorder.planned(cases)

        def timeout_for(planned: PlannedCase) -> float:
            return case_timeout or planned.benchmark.timeout_s

        try:
            for first, segment in _segments(cases):
                if segment[0].benchmark.distributed:
                    assert backend is not None
                    _run_distributed(segment, first, device, valid.policy, backend,
                                     timeout_for, recorder)
                    continue
                for offset, planned in enumerate(segment):
                    worker = slot.for_case(planned)
                    recorder.listener.started(first + offset, planned)
                    recorder.record(first + offset,
                                    _measure(slot, worker, planned, device, valid.policy,
                                             timeout_for(planned)))
        except KeyboardInterrupt:
            recorder.interrupt()
            slot.worker.kill()
        return recorder.finish()
    finally:
        slot.worker.stop()


def _measure(slot: _WorkerSlot, worker: Worker, planned: PlannedCase, device: DeviceInfo,
             policy: TimingPolicy, timeout: float) -> Measurement:
    """One case in the worker; a lost worker fails the case and is replaced."""
    started = time.time()
    try:
        reply = worker.ask(MeasureCase(planned, device, policy), timeout)
    except WorkerLost as lost:
        slot.replace()  # a fresh process for the cases that remain
        return not_measured(planned.case, STATUS_FAILED, str(lost), started,
                            time.time() - started)
    if isinstance(reply, CaseMeasured):
        return Measurement.from_dict(reply.record)
    reason = reply.message if isinstance(reply, Refused) else f"unexpected reply {reply!r}"
    return not_measured(planned.case, STATUS_FAILED, reason, started, time.time() - started)


class _WorkerSlot:
    """The worker process the next case runs in: replaced when it is lost, and when a
    case's worker key differs from those of the cases it already ran."""

    def __init__(self) -> None:
        self.worker = Worker()
        self._keys: set[str] = set()

    def for_case(self, planned: PlannedCase) -> Worker:
        worker_key = planned.benchmark.worker_key
        key = worker_key(planned.params) if worker_key else ""
        if key and self._keys - {key}:
            self.replace()
        if key:
            self._keys.add(key)
        return self.worker

    def replace(self) -> None:
        self.worker.stop()
        self.worker = Worker()
        self._keys = set()


def _segments(cases: Sequence[PlannedCase]) -> list[tuple[int, list[PlannedCase]]]:
    """Consecutive cases that run the same way: in the worker, or across so many ranks."""
    out: list[tuple[int, list[PlannedCase]]] = []
    for index, planned in enumerate(cases):
        way = (planned.benchmark.distributed, planned.ranks)
        if out and (out[-1][1][0].benchmark.distributed, out[-1][1][0].ranks) == way:
            out[-1][1].append(planned)
        else:
            out.append((index, [planned]))
    return out


def _run_distributed(
    segment: list[PlannedCase],
    first: int,
    device: DeviceInfo,
    policy: TimingPolicy,
    backend: str,
    timeout_for: Callable[[PlannedCase], float],
    recorder: RunRecorder,
) -> None:
    from accelbench.runner.launcher import RankGroup

    ranks = segment[0].ranks
    runnable = []
    for offset, planned in enumerate(segment):
        if planned.benchmark.min_ranks > ranks:
            # Said without starting any rank: there would be nothing to measure.
            recorder.listener.started(first + offset, planned)
            reason = (f"needs at least {planned.benchmark.min_ranks} ranks; run with "
                      f"--nproc-per-node {planned.benchmark.min_ranks} or under torchrun")
            recorder.record(first + offset, not_measured(planned.case, STATUS_SKIPPED, reason,
                                                         time.time(), 0.0))
        else:
            runnable.append((first + offset, planned))
    if not runnable:
        return
    RankGroup(ranks, backend).run(
        [planned for _, planned in runnable], device, policy, timeout_for,
        on_start=lambda i: recorder.listener.started(runnable[i][0], runnable[i][1]),
        on_result=lambda i, m: recorder.record(runnable[i][0], m),
    )


def _ask_fingerprint(worker: Worker, device: str) -> dict[str, Any]:
    try:
        reply = worker.ask(ReadFingerprint(device), FINGERPRINT_TIMEOUT_S)
    except WorkerLost as lost:
        raise UserError(f"could not read the device and stack: {lost}", EXIT_INTERNAL) from None
    if isinstance(reply, Refused):
        raise UserError(reply.message, reply.exit_code)
    if not isinstance(reply, FingerprintRead):
        raise UserError(f"could not read the device and stack: unexpected reply {reply!r}",
                        EXIT_INTERNAL)
    return reply.fingerprint

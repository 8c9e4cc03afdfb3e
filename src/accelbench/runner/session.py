"""One `accelbench run`: validate, find the device, plan, measure each case, store it.

The supervisor (this module) never imports torch: the worker process does the
measuring, and every finished case is written to the store before the next starts.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from accelbench import __version__
from accelbench.core.measurement import STATUS_FAILED, STATUS_SKIPPED, Measurement, not_measured
from accelbench.core.registry import Registry
from accelbench.env.device import DeviceInfo, parse_device_spec
from accelbench.errors import (
    EXIT_CASE_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UserError,
)
from accelbench.runner.plan import PlannedCase, Request, expand, timing_policy, validate
from accelbench.runner.supervisor import Worker, WorkerLost

FINGERPRINT_TIMEOUT_S = 300.0


class Listener(Protocol):
    """Progress callbacks, so the terminal display is not the session's business."""

    def planned(self, cases: Sequence[PlannedCase], fingerprint: Any, run_id: str) -> None: ...

    def started(self, index: int, planned: PlannedCase) -> None: ...

    def finished(self, index: int, measurement: Measurement) -> None: ...


class SilentListener:
    def planned(self, cases: Sequence[PlannedCase], fingerprint: Any, run_id: str) -> None:
        pass

    def started(self, index: int, planned: PlannedCase) -> None:
        pass

    def finished(self, index: int, measurement: Measurement) -> None:
        pass


@dataclass
class Outcome:
    run_id: str
    fingerprint: Any  # accelbench.env.fingerprint.Fingerprint
    measurements: list[Measurement] = field(default_factory=list)
    interrupted: bool = False

    @property
    def failed(self) -> list[Measurement]:
        return [m for m in self.measurements if m.status == STATUS_FAILED]

    @property
    def status(self) -> str:
        if self.interrupted:
            return "interrupted"
        return "failed" if self.failed else "complete"

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_CASE_FAILED if self.failed else EXIT_OK


def run_session(
    request: Request,
    store: Any,  # accelbench.store.Store
    registry: Registry,
    argv: Sequence[str] = (),
    listener: Listener | None = None,
    case_timeout: float | None = None,
) -> Outcome:
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.distributed import check_backend

    listener = listener or SilentListener()
    suite = validate(request, registry)
    parse_device_spec(request.device)
    policy = timing_policy(suite, request)

    slot = _WorkerSlot()
    try:
        fingerprint = Fingerprint.from_dict(_ask_fingerprint(slot.worker, request.device))
        device: DeviceInfo = fingerprint.device
        cases = expand(request, suite, registry, device, fingerprint.data["devices"]["count"])
        if any(c.benchmark.distributed for c in cases):
            backend = check_backend(request.backend, device.type)
            cases = [c.on_world(c.ranks, backend) if c.benchmark.distributed else c
                     for c in cases]
        run_id = store.begin_run(
            fingerprint=fingerprint.to_dict(),
            fingerprint_id=fingerprint.fingerprint_id,
            generation_key=fingerprint.generation_key,
            device=device.torch_device,
            suite=request.suite,
            argv=list(argv),
            host=socket.gethostname(),
            accelbench_version=__version__,
        )
        outcome = Outcome(run_id, fingerprint)
        listener.planned(cases, fingerprint, run_id)

        def timeout_for(planned: PlannedCase) -> float:
            return case_timeout or planned.benchmark.timeout_s

        def record(index: int, measurement: Measurement) -> None:
            store.add_measurement(run_id, measurement)
            outcome.measurements.append(measurement)
            listener.finished(index, measurement)

        try:
            for first, segment in _segments(cases):
                if segment[0].benchmark.distributed:
                    _run_distributed(segment, first, device, policy, request, timeout_for,
                                     listener, record)
                    continue
                for offset, planned in enumerate(segment):
                    worker = slot.for_case(planned)
                    listener.started(first + offset, planned)
                    started = time.time()
                    try:
                        reply = worker.ask(("case", planned, device, policy), timeout_for(planned))
                        measurement = _measurement_from(reply, planned, started)
                    except WorkerLost as lost:
                        measurement = not_measured(planned.case, STATUS_FAILED, str(lost),
                                                   started, time.time() - started)
                        slot.replace()  # a fresh process for the cases that remain
                    record(first + offset, measurement)
        except KeyboardInterrupt:
            outcome.interrupted = True
            slot.worker.kill()
        store.finish_run(run_id, outcome.status)
        return outcome
    finally:
        slot.worker.stop()


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
    policy: Any,
    request: Request,
    timeout_for: Any,
    listener: Listener,
    record: Any,
) -> None:
    from accelbench.runner.distributed import check_backend
    from accelbench.runner.launcher import RankGroup

    ranks = segment[0].ranks
    runnable = []
    for offset, planned in enumerate(segment):
        if planned.benchmark.min_ranks > ranks:
            # Said without starting any rank: there would be nothing to measure.
            listener.started(first + offset, planned)
            reason = (f"needs at least {planned.benchmark.min_ranks} ranks; run with "
                      f"--nproc-per-node {planned.benchmark.min_ranks} or under torchrun")
            record(first + offset, not_measured(planned.case, STATUS_SKIPPED, reason,
                                                time.time(), 0.0))
        else:
            runnable.append((first + offset, planned))
    if not runnable:
        return
    group = RankGroup(ranks, check_backend(request.backend, device.type))
    group.run(
        [planned for _, planned in runnable], device, policy, timeout_for,
        on_start=lambda i: listener.started(runnable[i][0], runnable[i][1]),
        on_result=lambda i, m: record(runnable[i][0], m),
    )


def _ask_fingerprint(worker: Worker, device: str) -> dict[str, Any]:
    try:
        reply = worker.ask(("fingerprint", device), FINGERPRINT_TIMEOUT_S)
    except WorkerLost as lost:
        raise UserError(f"could not read the device and stack: {lost}", EXIT_INTERNAL) from None
    if reply[0] == "error":
        raise UserError(reply[2], reply[1])
    return reply[1]


def _measurement_from(reply: tuple[Any, ...], planned: PlannedCase, started: float) -> Measurement:
    if reply[0] == "result":
        return Measurement.from_dict(reply[1])
    reason = reply[2] if len(reply) > 2 else repr(reply)
    return not_measured(planned.case, STATUS_FAILED, reason, started, time.time() - started)

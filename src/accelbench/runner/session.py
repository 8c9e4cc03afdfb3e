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
from accelbench.core.measurement import STATUS_FAILED, Measurement, not_measured
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

    listener = listener or SilentListener()
    suite = validate(request, registry)
    parse_device_spec(request.device)
    policy = timing_policy(suite, request)

    worker = Worker()
    try:
        answer = _ask_fingerprint(worker, request.device)
        fingerprint = Fingerprint.from_dict(answer)
        device: DeviceInfo = fingerprint.device
        cases = expand(request, suite, registry, device)
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
        try:
            for index, planned in enumerate(cases):
                listener.started(index, planned)
                timeout = case_timeout or planned.benchmark.timeout_s
                started = time.time()
                try:
                    reply = worker.ask(("case", planned, device, policy), timeout)
                    measurement = _measurement_from(reply, planned, started)
                except WorkerLost as lost:
                    measurement = not_measured(planned.case, STATUS_FAILED, str(lost), started,
                                               time.time() - started)
                    worker = Worker()  # a fresh process for the cases that remain
                store.add_measurement(run_id, measurement)
                outcome.measurements.append(measurement)
                listener.finished(index, measurement)
        except KeyboardInterrupt:
            outcome.interrupted = True
            worker.kill()
        store.finish_run(run_id, outcome.status)
        return outcome
    finally:
        worker.stop()


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

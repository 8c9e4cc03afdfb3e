"""One run's life in the store: begun once, each case recorded the moment it is measured,
finished with the status its cases give. Every path that stores a run (`run`, `run`
under torchrun, `profile`, `profile` under torchrun) goes through `RunRecorder`.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from accelbench import __version__
from accelbench.core.measurement import Measurement
from accelbench.core.names import RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED, STATUS_FAILED
from accelbench.errors import (
    EXIT_CASE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    Terminated,
)

if TYPE_CHECKING:
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.plan import PlannedCase
    from accelbench.store import Store


class Listener(Protocol):
    """Progress callbacks, so the terminal display is not the session's business."""

    def planned(self, cases: Sequence[PlannedCase], fingerprint: Fingerprint,
                run_id: str) -> None: ...

    def started(self, index: int, planned: PlannedCase) -> None: ...

    def finished(self, index: int, measurement: Measurement) -> None: ...


class SilentListener:
    def planned(self, cases: Sequence[PlannedCase], fingerprint: Fingerprint,
                run_id: str) -> None:
        pass

    def started(self, index: int, planned: PlannedCase) -> None:
        pass

    def finished(self, index: int, measurement: Measurement) -> None:
        pass


@dataclass
class Outcome:
    """What a run measured, as it stands: complete, failed or interrupted."""

    run_id: str
    fingerprint: Fingerprint
    measurements: list[Measurement] = field(default_factory=list)
    interrupted: bool = False
    terminated: bool = False  # interrupted by SIGTERM rather than Ctrl-C

    @property
    def failed(self) -> list[Measurement]:
        return [m for m in self.measurements if m.status == STATUS_FAILED]

    @property
    def status(self) -> str:
        if self.interrupted:
            return RUN_INTERRUPTED
        return RUN_FAILED if self.failed else RUN_COMPLETE

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_TERMINATED if self.terminated else EXIT_INTERRUPTED
        return EXIT_CASE_FAILED if self.failed else EXIT_OK


class RunRecorder:
    """Begins a run in the store; `record` stores a case before it returns; `finish`
    closes the run with the status of what was recorded (or the one given)."""

    def __init__(
        self,
        store: Store,
        fingerprint: Fingerprint,
        suite: str | None,
        argv: Sequence[str],
        listener: Listener | None = None,
    ) -> None:
        self._store = store
        self.listener: Listener = listener or SilentListener()
        run_id = store.begin_run(
            fingerprint=fingerprint.to_dict(),
            fingerprint_id=fingerprint.fingerprint_id,
            generation_key=fingerprint.generation_key,
            device=fingerprint.device.torch_device,
            suite=suite,
            argv=list(argv),
            host=socket.gethostname(),
            accelbench_version=__version__,
        )
        self.outcome = Outcome(run_id, fingerprint)
        self._finished = False

    @classmethod
    def resumed(cls, store: Store, outcome: Outcome,
                listener: Listener | None = None) -> RunRecorder:
        """A recorder of a run begun by another, through another connection to its store
        (a connection serves the thread that opened it): it goes on from `outcome`."""
        recorder = cls.__new__(cls)
        recorder._store = store
        recorder.listener = listener or SilentListener()
        recorder.outcome = outcome
        recorder._finished = False
        return recorder

    @property
    def run_id(self) -> str:
        return self.outcome.run_id

    @property
    def store(self) -> Store:
        return self._store

    def planned(self, cases: Sequence[PlannedCase]) -> None:
        self.listener.planned(cases, self.outcome.fingerprint, self.run_id)

    def record(self, index: int, measurement: Measurement) -> None:
        """Store one case's measurement (committed before this returns), then tell."""
        self._store.add_measurement(self.run_id, measurement)
        self.outcome.measurements.append(measurement)
        self.listener.finished(index, measurement)

    def interrupt(self, stop: BaseException | None = None) -> None:
        """The run was stopped by `stop` (Ctrl-C's KeyboardInterrupt, or Terminated)."""
        self.outcome.interrupted = True
        self.outcome.terminated = isinstance(stop, Terminated)

    def finish(self, status: str | None = None) -> Outcome:
        """Close the run, once: with `status`, else the outcome's own."""
        if not self._finished:
            self._store.finish_run(self.run_id, status or self.outcome.status)
            self._finished = True
        return self.outcome

"""One run's life in the store: begun once, each case recorded the moment it is measured,
finished with the status its cases give. Every path that stores a run (`run`, `run`
under torchrun, `profile`, `profile` under torchrun) goes through `RunRecorder`.

When the store fails in mid-run (its server stopped answering, a table was dropped), the
run stops there, and nothing it measured is lost: the run, with every case measured so
far, is spooled into a SQLite store of its own (`spool/RUN.sqlite` in the store's files
folder), and the error says how to merge it once the store is back (`accelbench merge`
completes the run that was left "running"). A store that still answers is told the run
failed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from accelbench.core.measurement import EXIT_CODE, Measurement
from accelbench.core.names import RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED, STATUS_FAILED
from accelbench.env.fingerprint import host_name
from accelbench.errors import (
    EXIT_CASE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    StoreError,
    StoreUnreachable,
    Terminated,
)
from accelbench.version import __version__

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from accelbench.core.request import RunRequest
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.plan import PlannedCase
    from accelbench.runner.resume import Resume
    from accelbench.store import Store
    from accelbench.store.records import ResumeEvent


class Listener(Protocol):
    """Progress callbacks, so the terminal display is not the session's business.

    In a run: `planned` once; then, for each process that measures a case (a worker
    process, or a torchrun job's ranks), `started` and `process_started` as it begins
    and `process_done` once it has measured; `finished` once the case is recorded (after
    its last process, or at once when a process fails or skips it). `index` is the case's
    place in the planned cases."""

    def planned(self, cases: Sequence[PlannedCase], fingerprint: Fingerprint,
                run_id: str) -> None: ...

    def started(self, index: int, planned: PlannedCase) -> None: ...

    def process_started(self, index: int, planned: PlannedCase, process: int,
                        processes: int, budget_s: float) -> None:
        """Process `process` (1-based) of the `processes` the case is measured in begins;
        its timing policy gives it about `budget_s` seconds (warm-up and sampling)."""
        ...

    def process_done(self, index: int, process: int, processes: int,
                     measurement: Measurement) -> None:
        """Process `process` of case `index` has measured (`measurement`, its part)."""
        ...

    def finished(self, index: int, measurement: Measurement) -> None: ...


class SilentListener:
    def planned(self, cases: Sequence[PlannedCase], fingerprint: Fingerprint,
                run_id: str) -> None:
        pass

    def started(self, index: int, planned: PlannedCase) -> None:
        pass

    def process_started(self, index: int, planned: PlannedCase, process: int,
                        processes: int, budget_s: float) -> None:
        pass

    def process_done(self, index: int, process: int, processes: int,
                     measurement: Measurement) -> None:
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
    # A resumed run (`runner.resume`): its measurements begin with this many results
    # stored before the resume and kept.
    kept: int = 0
    resumed: bool = False

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
        failed = self.failed
        # Cases that failed on a user's error (an engine's endpoint unreachable) each say
        # its exit code; where every failure says the same one, the run exits with it.
        codes = {m.details.get(EXIT_CODE) for m in failed}
        if len(codes) == 1 and isinstance(code := codes.pop(), int) and code > EXIT_CASE_FAILED:
            return code
        return EXIT_CASE_FAILED if failed else EXIT_OK


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
        request: RunRequest | None = None,
    ) -> None:
        self._store = store
        self.listener: Listener = listener or SilentListener()
        self._started_at = time.time()
        self._suite = suite
        self._argv = tuple(argv)
        self._request: Mapping[str, Any] | None = (
            None if request is None else request.to_dict())
        run_id = store.begin_run(
            fingerprint=fingerprint.to_dict(),
            fingerprint_id=fingerprint.fingerprint_id,
            generation_key=fingerprint.generation_key,
            device=fingerprint.device.torch_device,
            suite=suite,
            argv=list(argv),
            host=host_name(),
            accelbench_version=__version__,
            started_at=self._started_at,
            request=self._request,
        )
        self.outcome = Outcome(run_id, fingerprint)
        self._finished = False
        self._earlier: tuple[Measurement, ...] = ()
        self._resumes: tuple[ResumeEvent, ...] = ()

    @classmethod
    def resuming(cls, store: Store, fingerprint: Fingerprint, resume: Resume,
                 listener: Listener | None = None) -> RunRecorder:
        """A recorder that goes on with the stored run of `resume`: the resume is noted
        in the store (the run is "running" again, on `fingerprint`, the run's own stack),
        and the outcome starts from the results it keeps."""
        record = resume.run.record
        event = store.resume_run(record.id, fingerprint_id=fingerprint.fingerprint_id)
        recorder = cls.__new__(cls)
        recorder._store = store
        recorder.listener = listener or SilentListener()
        recorder._started_at = record.started_at
        recorder._suite = record.suite
        recorder._argv = record.argv
        recorder._request = record.request
        kept = resume.kept
        recorder.outcome = Outcome(record.id, fingerprint, list(kept), kept=len(kept),
                                   resumed=True)
        recorder._finished = False
        recorder._earlier = resume.earlier
        recorder._resumes = (*record.resumes, event)
        return recorder

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
        recorder._started_at = time.time()
        recorder._suite = None
        recorder._argv = ()
        recorder._request = None
        recorder._earlier = ()
        recorder._resumes = ()
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
        """Store one case's measurement (committed before this returns), then tell.
        A store that fails ends the run (see the module docstring)."""
        try:
            self._store.add_measurement(self.run_id, measurement)
        except StoreError as lost:
            self.outcome.measurements.append(measurement)
            raise self._spooled(lost) from None
        self.outcome.measurements.append(measurement)
        self.listener.finished(index, measurement)

    def interrupt(self, stop: BaseException | None = None) -> None:
        """The run was stopped by `stop` (Ctrl-C's KeyboardInterrupt, or Terminated)."""
        self.outcome.interrupted = True
        self.outcome.terminated = isinstance(stop, Terminated)

    def finish(self, status: str | None = None) -> Outcome:
        """Close the run, once: with `status`, else the outcome's own."""
        if not self._finished:
            try:
                self._store.finish_run(self.run_id, status or self.outcome.status)
            except StoreError as lost:
                self._finished = True
                raise self._spooled(lost, status or self.outcome.status) from None
            self._finished = True
        return self.outcome

    def _spooled(self, lost: StoreError, status: str = RUN_FAILED) -> StoreError:
        """The run as measured so far, kept in a store file of its own; the error to
        raise, which says where it is and how to merge it."""
        from accelbench.store import RunRecord, Store, StoredRun

        if not isinstance(lost, StoreUnreachable):
            # The store answers: it is told, so that the run is not left "running".
            with contextlib.suppress(StoreError):
                self._store.finish_run(self.run_id, RUN_FAILED)
        self._finished = True
        location = self._store.location
        path = location.files_dir / "spool" / f"{self.run_id}.sqlite"
        fingerprint = self.outcome.fingerprint
        measurements = tuple(self.outcome.measurements)
        # A resumed run's whole record: what it had stored before, then what it measured.
        rows = (*self._earlier, *measurements)
        record = RunRecord(
            id=self.run_id, started_at=self._started_at, finished_at=time.time(),
            status=status, suite=self._suite, argv=self._argv,
            device=fingerprint.device.torch_device,
            generation_key=fingerprint.generation_key, host=host_name(),
            accelbench_version=__version__, fingerprint_id=fingerprint.fingerprint_id,
            n_ok=0, n_failed=0, n_skipped=0, resumes=self._resumes, request=self._request)
        try:
            with Store.open(path, create=True) as spool:
                spool.import_runs([StoredRun.of_rows(record, fingerprint.to_dict(), rows)])
        except StoreError as e:
            return type(lost)(f"{lost}; the {len(measurements)} case(s) measured could not "
                              f"be kept either: {e}")
        into = location.url_without_secrets or str(location)
        return type(lost)(f"{lost}; the run's {len(measurements)} measured case(s) are kept "
                          f"in {path}: `accelbench merge {path} --into {into}` adds them "
                          "once the store is back")

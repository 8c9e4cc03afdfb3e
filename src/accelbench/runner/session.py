"""One run's lifecycle, written once: read the device and stack, plan, record, execute,
finish. What differs between the ways a run's cases are run is an `Executor`:

- `Supervised` (this module): `accelbench run` on one node; a supervised worker process
  measures each case, and torchrun jobs that accelbench starts run the distributed ones;
- `runner.rank_session.RankExecutor`: every rank of a torchrun job the user started;
- `profile.session.ProfileExecutor`: one case under the PyTorch profiler, in this
  process or on every rank of a torchrun job.

Every finished case is written to the store before the next starts; an interrupted run
is stored with what it measured so far.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.core.device import DeviceInfo
from accelbench.errors import EXIT_INTERNAL, UserError
from accelbench.runner.messages import (
    FingerprintRead,
    ReadFingerprint,
    Refused,
)
from accelbench.runner.plan import PlannedCase, ValidRequest, expand, given_aside
from accelbench.runner.recorder import Listener, Outcome, RunRecorder, SilentListener
from accelbench.runner.rounds import HostSpeeds, Rounds, run_distributed, run_in_workers, skip_all
from accelbench.runner.supervisor import (
    Worker,
    WorkerFactory,
    WorkerLost,
    WorkerProcess,
    WorkerSlot,
)

if TYPE_CHECKING:
    from accelbench.core.request import RunRequest
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.resume import Resume
    from accelbench.store import Store

__all__ = ["Executor", "Listener", "Outcome", "SilentListener", "Supervised", "conduct",
           "run_session"]

FINGERPRINT_TIMEOUT_S = 300.0


class Executor(Protocol):
    """One way of running a run's cases, for `conduct`, which calls `fingerprint`, then
    `plan`, then `execute` (with the run's recorder where `stores`), and `close` last,
    whatever happened."""

    @property
    def stores(self) -> bool:
        """Whether this process stores the run (read after `fingerprint`: under torchrun
        only rank 0 does)."""
        ...

    def fingerprint(self) -> Fingerprint:
        """The device and stack the cases will run on, read where they run."""
        ...

    def plan(self, fingerprint: Fingerprint) -> tuple[Fingerprint, list[PlannedCase]]:
        """The run's cases, placed (ranks, threads), and the fingerprint to store (with
        the nodes the ranks run on, for a distributed run)."""
        ...

    def execute(self, cases: Sequence[PlannedCase], recorder: RunRecorder | None
                ) -> str | None:
        """Run the cases, recording each; returns the run's status where it is not the
        recorded cases' own (None)."""
        ...

    def interrupted(self, stop: KeyboardInterrupt, recorder: RunRecorder) -> None:
        """Ctrl-C or SIGTERM during `execute`: note it (or settle the run) and stop what
        runs; the run is then finished with what was recorded."""
        ...

    def close(self) -> None:
        """Release what the executor holds (worker processes, the process group)."""
        ...


def conduct(executor: Executor, open_store: Callable[[], Store], request: RunRequest,
            argv: Sequence[str] = (), listener: Listener | None = None,
            resume: Resume | None = None) -> Outcome | None:
    """Run one run through `executor`. The store is opened only once the cases are
    planned, so bad input never begins a run. Returns the outcome; None in a process
    that does not store the run (a rank other than 0).

    With `resume`, the run goes on with a stored one (`runner.resume`): refused before
    anything is stored when the stack is not the run's own; its cases that are done are
    kept, and the others are measured and added to it."""
    try:
        fingerprint, cases = executor.plan(executor.fingerprint())
        if resume is not None:
            resume.check_stack(fingerprint)
            cases = resume.pending(cases)
        if not executor.stores:
            executor.execute(cases, None)
            return None
        recorder = (RunRecorder(open_store(), fingerprint, request.suite, argv, listener,
                                request)
                    if resume is None
                    else RunRecorder.resuming(open_store(), fingerprint, resume, listener))
        recorder.planned(cases)
        status = None
        try:
            status = executor.execute(cases, recorder)
        except KeyboardInterrupt as stop:
            executor.interrupted(stop, recorder)
        return recorder.finish(status)
    finally:
        executor.close()


def run_session(
    valid: ValidRequest,
    store: Store | Callable[[], Store],
    argv: Sequence[str] = (),
    listener: Listener | None = None,
    case_timeout: float | None = None,
    worker_factory: WorkerFactory = Worker,
    resume: Resume | None = None,
) -> Outcome:
    """`accelbench run` on this node, supervised; `worker_factory` starts a worker
    process (tests give a fake); `resume` goes on with a stored run (`conduct`). `store`
    is the store, or what opens it once the cases are planned (nothing is created for a
    request refused before)."""
    opened = store if callable(store) else _given(store)
    outcome = conduct(Supervised(valid, case_timeout, worker_factory), opened,
                      valid.request, argv, listener, resume)
    assert outcome is not None  # the supervisor always stores its run
    return outcome


def _given(store: Store) -> Callable[[], Store]:
    return lambda: store


class Supervised:
    """The cases measured by worker processes this process supervises (one at a time,
    fresh for each round), the distributed ones by torchrun jobs it starts. This process
    never imports torch."""

    stores = True

    def __init__(self, valid: ValidRequest, case_timeout: float | None = None,
                 worker_factory: WorkerFactory = Worker) -> None:
        self.valid = valid
        self.case_timeout = case_timeout
        self.worker_factory = worker_factory
        self._slot: WorkerSlot | None = None
        self._backend: str | None = None
        self._refused: dict[int, str] = {}
        self._device: DeviceInfo | None = None

    @property
    def slot(self) -> WorkerSlot:
        """The worker slot (once `fingerprint` has started it)."""
        assert self._slot is not None
        return self._slot

    @property
    def device(self) -> DeviceInfo:
        """The device the cases run on (once planned)."""
        assert self._device is not None
        return self._device

    @property
    def backend(self) -> str | None:
        """The collective backend of the distributed cases (once planned)."""
        return self._backend

    @property
    def refused(self) -> dict[int, str]:
        """Rank counts this node cannot hold, with why (once planned)."""
        return self._refused

    def fingerprint(self) -> Fingerprint:
        from accelbench.env.fingerprint import Fingerprint
        from accelbench.runner.lifeline import remove_orphaned_folders

        remove_orphaned_folders()  # of runs that were killed before they could
        self._slot = WorkerSlot(self.worker_factory)
        return Fingerprint.from_dict(_ask_fingerprint(self._slot.worker,
                                                      self.valid.request.device))

    def plan(self, fingerprint: Fingerprint) -> tuple[Fingerprint, list[PlannedCase]]:
        from accelbench.runner.distributed import check_backend

        request = self.valid.request
        device = self._device = fingerprint.device
        count = fingerprint.data["devices"]["count"]
        cases = expand(self.valid, device, count)
        say_given_aside(self.valid, cases)
        if any(c.benchmark.distributed for c in cases):
            backend = self._backend = check_backend(request.backend, device.type)
            self._refused = _refused_ranks(cases, device, count, self.valid)
            cases = [c.on_world(c.ranks, backend) if c.benchmark.distributed else c
                     for c in cases]
            fingerprint = fingerprint.with_cluster(_this_node(cases))
        if device.type == "cpu":
            cases, source = on_threads(cases, request.threads)
            fingerprint = fingerprint.with_threads_source(source)
        return fingerprint, cases

    def execute(self, cases: Sequence[PlannedCase], recorder: RunRecorder | None
                ) -> str | None:
        assert recorder is not None and self._slot is not None and self._device is not None
        policy = self.valid.policy
        timeout_for = timeouts(self.case_timeout)
        speeds = HostSpeeds()
        for first, segment in _segments(cases):
            rounds = Rounds(segment, first, policy, recorder, self.valid.request.wait_quiet,
                            speeds)
            if segment[0].ranks in self._refused:
                skip_all(rounds, self._refused[segment[0].ranks])
            elif segment[0].benchmark.distributed:
                assert self._backend is not None
                # The ranks get the devices to themselves: a worker would hold a context
                # on the first GPU (less memory for rank 0, and no start at all in
                # exclusive-process mode).
                self._slot.release()
                run_distributed(rounds, self._device, policy, self._backend, timeout_for,
                                self.valid.registry)
            else:
                run_in_workers(rounds, self._slot, self._device, policy, timeout_for)
        return None

    def interrupted(self, stop: KeyboardInterrupt, recorder: RunRecorder) -> None:
        recorder.interrupt(stop)
        if self._slot is not None:
            self._slot.kill()

    def close(self) -> None:
        if self._slot is not None:
            self._slot.release()


def say_given_aside(valid: ValidRequest, cases: Sequence[PlannedCase], say: bool = True
                    ) -> None:
    """A note on stderr (where `say`) for each parameter given that applies to some
    cases only; a UserError for one that applies to none (`plan.given_aside`)."""
    import sys

    notes = given_aside(valid, cases)
    for note in notes if say else ():
        print(f"accelbench: note: {note}", file=sys.stderr)


def timeouts(case_timeout: float | None) -> Callable[[PlannedCase], float]:
    """How long each case may run: `case_timeout` (--timeout) for every case, else the
    case's own (its benchmark's, with any time its parameters add)."""
    return lambda planned: case_timeout or planned.benchmark.case_timeout(planned.params)


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


def _refused_ranks(cases: Sequence[PlannedCase], device: DeviceInfo, device_count: int,
                   valid: ValidRequest) -> dict[int, str]:
    """Rank counts of distributed cases the node cannot hold, with the reason, checked
    before any rank starts or the run is begun. A count asked for (--nproc-per-node) is
    refused outright; one a suite asks for skips its cases, so the suite's other cases
    still run on a small node. With --oversubscribe, say so on stderr and go on."""
    import sys

    from accelbench.runner.capacity import check_ranks

    request = valid.request
    _, first = valid.device
    refused = {}
    for ranks in sorted({c.ranks for c in cases if c.benchmark.distributed}):
        try:
            warning = check_ranks(ranks, device.type, device_count, request.oversubscribe,
                                  first=first or 0)
        except UserError as exc:
            if request.nproc_per_node is not None:
                raise
            refused[ranks] = str(exc)
            continue
        if warning:
            print(f"accelbench: warning: {warning}", file=sys.stderr)
    return refused


def _this_node(cases: Sequence[PlannedCase]) -> dict[str, Any]:
    """The one node the ranks of --nproc-per-node run on (env.cluster), with the most
    ranks a case runs on; the ranks inherit this process's interconnect settings."""
    from accelbench.env.cluster import Cluster
    from accelbench.runner.nodes import interconnect_env, node_name

    ranks = max(c.ranks for c in cases if c.benchmark.distributed)
    return Cluster.one_node(node_name(), ranks, interconnect_env()).to_dict()


def on_threads(cases: Sequence[PlannedCase], requested: int | None
                ) -> tuple[list[PlannedCase], str]:
    """The CPU cases on their thread count, and how it was chosen (for the run's record):
    `--threads`, else all but one of the CPUs this process may use, whatever the host is
    doing now; a distributed case shares the count between its ranks."""
    from accelbench.runner.capacity import (
        default_threads,
        split_threads,
        threads_source,
        usable_cpus,
    )

    cpus = usable_cpus()
    threads = requested or default_threads(cpus)
    split = "each distributed case's ranks" if any(c.ranks > 1 for c in cases) else None
    return ([c.with_threads(split_threads(threads, c.ranks)) for c in cases],
            threads_source(requested, cpus, split))


def _ask_fingerprint(worker: WorkerProcess, device: str) -> dict[str, Any]:
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

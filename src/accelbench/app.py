"""The run as an application function: a `RunRequest` in, a stored run and its report out.

It composes what the layers below it do (the runner's session, the profiler, the store,
the report), so it sits above them and below the command line.

Every way of starting a run comes here: the commands that measure (`run`, `validate`,
`health`, `isolate` and a family's own, each a thin adapter: options -> RunRequest ->
`run` -> print), `run --request FILE`, `run --resume` (the stored request), a Slurm job
and a torchrun rank (the request as JSON), and `accelbench.run(...)` from Python. Nothing
below this line reads a command line:

    RunRequest -> prepare (checked once, before anything starts or a store is opened)
      -> runner.session (fingerprint, plan, executors) -> store (each case as it finishes,
         the request with its run) -> report.files (the run's report) -> Finished
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.core.request import RUN, RequestError, RunRequest
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.analysis.ab import AbResult
    from accelbench.core.registry import Registry
    from accelbench.core.request import AbRequest
    from accelbench.profile.explain_session import Explained, ExplainRequest
    from accelbench.profile.explain_session import Listener as ExplainListener
    from accelbench.profile.session import ProfileOutcome
    from accelbench.runner.ab import AbListener, AbOutcome
    from accelbench.runner.plan import ValidRequest
    from accelbench.runner.recorder import Listener, Outcome
    from accelbench.runner.resume import Resume
    from accelbench.runner.tune import Seams as TuneSeams
    from accelbench.runner.tune import StoredTable
    from accelbench.store import Store, StoredRun
    from accelbench.store.location import StoreLocation

__all__ = ["AbFinished", "Finished", "Profiled", "StoreOnFirstUse", "Tuned", "ab", "explain",
           "prepare",
           "profile", "profile_ranks", "repeats", "resume", "run", "runs", "stored_request",
           "tune"]


@dataclass(frozen=True)
class Finished:
    """A run that was stored: what it measured, the store's name (secrets redacted) and
    the report written (None with `no_report`)."""

    outcome: Outcome
    store: str
    report: Path | None

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code


@dataclass(frozen=True)
class Profiled:
    """A profile that was stored: what it measured and traced, and the store's name."""

    outcome: ProfileOutcome
    store: str


@dataclass(frozen=True)
class AbFinished:
    """An A/B that was stored: what each side measured, the verdicts read back from the
    two stored runs, the store's name and the report written (None with `no_report`)."""

    outcome: AbOutcome
    result: AbResult
    store: str
    report: Path | None

    def exit_code(self, gate: float | None = None) -> int:
        """130/143 when interrupted; with a gate (a fraction), 1 when a case regressed by
        it, 9 when one may have and the evidence cannot tell, else 0; with none, 1 when a
        case failed on a side, else 0."""
        from accelbench.analysis.ab import gate as judge_gate
        from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE

        for outcome in (self.outcome.a, self.outcome.b):
            if outcome.interrupted:
                return outcome.exit_code
        if gate is not None:
            regressed, undecided = judge_gate(self.result.cases, gate)
            return EXIT_CASE_FAILED if regressed else EXIT_INCONCLUSIVE if undecided else 0
        failed = self.outcome.a.failed or self.outcome.b.failed
        return EXIT_CASE_FAILED if failed else 0


def default_registry() -> Registry:
    from accelbench.benchmarks import REGISTRY

    return REGISTRY


def prepare(request: RunRequest, registry: Registry | None = None) -> ValidRequest:
    """The request checked against the registry and its suite, each value parsed once;
    UserError on the first problem, before anything starts or a store is opened."""
    from accelbench.runner.plan import validate

    registry = registry or default_registry()
    if request.ab is not None:
        _check_ab(request)
    if request.profile is not None:
        from accelbench.profile.session import check_request

        return check_request(request, registry)
    return validate(request, registry)


def run(request: RunRequest, location: StoreLocation, listener: Listener | None = None, *,
        argv: Sequence[str] = (), registry: Registry | None = None,
        resume: Resume | None = None, valid: ValidRequest | None = None
        ) -> Finished | None:
    """Measure what `request` asks on this node, storing every case in the store at
    `location` as it finishes (with the request), then write the run's report. `argv` is
    the command line stored beside it, for people; `resume` goes on with a stored run.
    Under torchrun every rank measures and rank 0 stores: None on the other ranks."""
    from accelbench.runner.distributed import launched_by_torchrun
    from accelbench.runner.session import run_session

    _not_a_profile(request)
    valid = valid or prepare(request, registry)
    _check_report(request)
    if launched_by_torchrun():
        if resume is not None:
            # Only rank 0 reads the store, and every rank must plan the same cases.
            raise UserError("--resume is not supported under torchrun: start a new run there")
        return _run_as_rank(valid, location, listener, argv)
    # Opened once the cases are planned: a request refused before (no such device) leaves
    # no store behind.
    with StoreOnFirstUse(location) as store:
        try:
            outcome = run_session(valid, store, argv=argv, listener=listener,
                                  case_timeout=request.case_timeout, resume=resume)
        finally:  # Ctrl-C or a failed store too: no display is left drawing
            _closed(listener)
        return Finished(outcome, store().name, _write_report(request, store(), outcome))


def ab(request: RunRequest, location: StoreLocation, listener: AbListener | None = None,
       *, argv: Sequence[str] = (), registry: Registry | None = None,
       worker_factory: Callable[[str], object] | None = None,
       clock: Callable[[], float] | None = None) -> AbFinished:
    """Measure the request's cases under its two stacks (`request.ab`) in pairs of
    processes until each is decided or the budget is spent (runner.ab), storing each side
    as a run of its own; the verdicts are read back from the two stored runs, and the
    report shows both runs with the A/B's table. `worker_factory(side)` and `clock` (of
    the budget) are for tests."""
    import time

    from accelbench.analysis.ab import pairs_in
    from accelbench.runner.ab import run_ab
    from accelbench.runner.distributed import launched_by_torchrun
    from accelbench.store import Store

    if request.ab is None:
        raise UserError("not an A/B request: it has no `ab` settings (run it with "
                        "`accelbench run --request FILE`)")
    if launched_by_torchrun():
        raise UserError("accelbench ab starts each side's processes itself: run it outside "
                        "torchrun")
    valid = prepare(request, registry)
    _check_report(request)
    with Store.open(location, create=True) as store:
        outcome = run_ab(valid, store, listener, argv, worker_factory,
                         clock or time.monotonic)
        runs = [store.load_run(outcome.a.run_id), store.load_run(outcome.b.run_id)]
        (result,) = pairs_in(runs)
        report = None
        if not request.no_report:
            from accelbench.report.files import default_report_path, write_ab_report

            path = (Path(request.report) if request.report
                    else default_report_path(store.location.files_dir, f"ab-{outcome.id}"))
            report = write_ab_report(result, path)
        return AbFinished(outcome, result, store.name, report)


@dataclass(frozen=True)
class Tuned:
    """What `tune` did: the collecting run, the shapes, the table kept (runner.tune),
    and the A/B of the stack without and with it (None with no A/B)."""

    collected: Outcome
    gemms: int
    table: StoredTable
    ab: AbFinished | None


def tune(request: RunRequest, location: StoreLocation, *, python: str | None = None,
         ab_settings: AbRequest | None = None, tune_timeout: float | None = None,
         listener: Listener | None = None, ab_listener: AbListener | None = None,
         argv: Sequence[str] = (), registry: Registry | None = None,
         seams: TuneSeams | None = None) -> Tuned:
    """`accelbench tune` (runner.tune): refuse, before anything is stored, where TunableOp
    has nothing to tune (DeviceError); run the request's cases once under `python` with
    TunableOp recording their GEMM shapes (an ordinary stored run); tune the shapes in a
    process of that stack within `tune_timeout`; keep the table beside the store; then,
    with `ab_settings`, A/B the stack without it (A) and with it (B)."""
    import dataclasses

    from accelbench.core.request import AB, Stack
    from accelbench.runner import tune as steps
    from accelbench.runner.distributed import launched_by_torchrun
    from accelbench.runner.lifeline import owned_folder

    seams = seams or steps.Seams()
    if launched_by_torchrun():
        raise UserError("accelbench tune starts its processes itself: run it outside torchrun")
    if request.repeat not in (None, 1):
        raise UserError("tune runs the selection once to collect its GEMMs: leave out --repeat")
    if ab_settings is not None:
        _check_report(request)
    valid = prepare(steps.collection_request(request), registry)
    gpus = steps.check_tunable(valid.device[0], python, seams.probe)
    with owned_folder() as work:
        stack = Stack(python, tuple(steps.collection_env(work).items()))
        with StoreOnFirstUse(location) as store:
            collected = steps.collect(valid, store, stack, argv=argv, listener=listener,
                                      base=seams.workers("collect"))
        if collected.interrupted:
            raise KeyboardInterrupt
        gemms, table = steps.tune_collected(collected, work, request, python, gpus,
                                            location.files_dir, seams.run_tuner, tune_timeout)
    if ab_settings is None:
        return Tuned(collected, gemms, table, None)
    pair = dataclasses.replace(ab_settings, a=Stack(python, steps.untuned_env()),
                               b=Stack(python, steps.tuned_env(table)))
    factory = (None if seams.workers("a") is None
               else lambda side: seams.workers(side))
    finished = ab(request.replace(command=AB, ab=pair), location, ab_listener, argv=argv,
                  registry=registry, worker_factory=factory)
    return Tuned(collected, gemms, table, finished)


def _check_ab(request: RunRequest) -> None:
    """An A/B request's stacks exist (a request file may name any), and what it asks of
    a run fits an A/B."""
    from accelbench.runner.stack import python_of

    assert request.ab is not None
    for side in ("a", "b"):
        stack = getattr(request.ab, side)
        if stack.python is not None:
            python_of(stack.python, f"--{side}")
    if request.repeat not in (None, 1):
        raise UserError("an A/B runs its own rounds: leave out --repeat")
    if request.profile is not None:
        raise UserError("a request is an A/B or a profile, not both")


def repeats(request: RunRequest, registry: Registry | None = None) -> int:
    """How many runs `request` makes (`runs`): its `repeat`, else its suite's."""
    _not_a_profile(request)
    return request.repeat or prepare(request, registry).suite.repeat


def _not_a_profile(request: RunRequest) -> None:
    if request.profile is not None:
        raise UserError("a profile request: run it with `accelbench profile --request FILE`")
    if request.ab is not None:
        raise UserError("an A/B request: run it with `accelbench ab --request FILE`")


def runs(request: RunRequest, location: StoreLocation, listener: Listener | None = None, *,
         argv: Sequence[str] = (), registry: Registry | None = None,
         announce: Callable[[int, int], None] | None = None) -> Iterator[Finished]:
    """The runs `request` asks for, one after another (`repeat`, else its suite's), each
    stored as its own run; `announce(number, times)` is told before each. Stops after a
    run that was interrupted."""
    from accelbench.runner.distributed import launched_by_torchrun

    _not_a_profile(request)
    valid = prepare(request, registry)
    times = request.repeat or valid.suite.repeat
    if times > 1:
        if launched_by_torchrun():
            raise UserError("--repeat starts its runs one after another: under torchrun, "
                            "start the job again for each run")
        if request.report and not request.no_report:
            raise UserError("--report names one file: with --repeat each run writes its own "
                            "report beside the store (or none, with --no-report)")
    for number in range(1, times + 1):
        if announce is not None:
            announce(number, times)
        finished = run(request, location, listener, argv=argv, valid=valid)
        if finished is None:
            return
        yield finished
        if finished.outcome.interrupted:
            return


def stored_request(stored: StoredRun) -> RunRequest:
    """The request a stored run was made with, checked as any request handed in; a
    UserError for a run that has none `run --resume` can go on with."""
    record = stored.record
    command = (record.request.get("command") if record.request is not None
               else record.argv[0] if record.argv else None)
    if command != RUN:
        made_by = f"`accelbench {command}`" if command else "no command that was stored"
        raise UserError(f"run {record.id} was made by {made_by}: only a run of "
                        "`accelbench run` can be resumed")
    if record.request is None:
        raise UserError(f"run {record.id} has no request to go on with: its stored command "
                        f"line does not read as `accelbench run`'s options")
    try:
        return RunRequest.from_dict(dict(record.request), f"run {record.id}: its request")
    except RequestError as exc:
        raise UserError(str(exc)) from None


def resume(ref: str, location: StoreLocation, listener: Listener | None = None, *,
           report: str | None = None, no_report: bool = False, argv: Sequence[str] = (),
           registry: Registry | None = None) -> Finished | None:
    """Go on with the stored run `ref` (runner.resume), with its own request; the report
    is written where asked now. None when the run is complete: nothing to resume (said on
    stderr, as the resume that begins is)."""
    from accelbench.runner.distributed import launched_by_torchrun
    from accelbench.store import Store

    if launched_by_torchrun():
        raise UserError("--resume is not supported under torchrun: start a new run there")
    # The run is locked before what is left of it is read, until it is closed: a second
    # resume of it at once is refused, and one after this sees what this one stored.
    with Store.open(location, create=False) as reader:
        run_id = reader.resolve_run(ref)
        with reader.hold_run(run_id):
            return _resume_held(reader.load_run(run_id), location, listener, report,
                                no_report, argv, registry)


def _resume_held(stored: StoredRun, location: StoreLocation, listener: Listener | None,
                 report: str | None, no_report: bool, argv: Sequence[str],
                 registry: Registry | None) -> Finished | None:
    """`resume` once the run is held: go on with it, unless it is complete."""
    from accelbench.runner.resume import Resume

    going_on = Resume(stored)
    if going_on.complete:
        print(f"accelbench: run {going_on.run_id} is complete: nothing to resume",
              file=sys.stderr)
        return None
    request = stored_request(going_on.run).replace(report=report, no_report=no_report)
    valid = prepare(request, registry)
    print(f"accelbench: resuming run {going_on.run_id} ({going_on.run.record.status}): "
          f"{len(going_on.kept)} stored case(s) kept", file=sys.stderr, flush=True)
    return run(request, location, listener, argv=argv, resume=going_on, valid=valid)


def profile(request: RunRequest, location: StoreLocation, *, argv: Sequence[str] = (),
            registry: Registry | None = None) -> Profiled | None:
    """Profile the one case of a profile request (`request.profile`): in this process, or
    on `nproc_per_node` ranks of a torchrun job started here, each handed the request as
    JSON; under a torchrun, this rank's part (None on ranks other than 0, and here when
    the ranks started here printed for themselves)."""
    from accelbench.profile.capture import Schedule
    from accelbench.profile.session import profile_as_rank, profile_session
    from accelbench.runner.distributed import check_backend, launched_by_torchrun
    from accelbench.store import Store

    spec = request.profile
    if spec is None:
        raise UserError("not a profile request: it has no `profile` settings")
    try:
        schedule = Schedule(wait=spec.wait, warmup=spec.warmup, active=spec.active,
                            memory=spec.memory)
    except ValueError as exc:
        raise UserError(f"invalid schedule: {exc}") from None
    valid = prepare(request, registry)
    kind, _ = valid.device
    if kind != "auto":
        check_backend(request.backend, kind)
    output = Path(spec.output) if spec.output else None
    if launched_by_torchrun():
        with StoreOnFirstUse(location) as store:
            outcome = profile_as_rank(valid, schedule, store, output, argv=argv)
            return None if outcome is None else Profiled(outcome, store().name)
    if (request.nproc_per_node or 1) > 1:
        return None
    with Store.open(location, create=True) as opened:
        return Profiled(profile_session(valid, opened, schedule, output, argv=argv),
                        opened.name)


def explain(request: ExplainRequest, location: StoreLocation,
            listener: ExplainListener | None = None) -> Explained:
    """Why one case of two stored runs differs: the case profiled again under each run's
    stack, the profiles aligned, the findings stored with the case (profile.explain_session).
    The store must exist: explaining creates no store."""
    from accelbench.profile.explain_session import explain as explain_case
    from accelbench.store import Store

    Store.open(location, create=False).close()  # refused when missing: none is created
    with Store.open(location, create=True) as store:  # the findings are written to it
        return explain_case(request, store, location, listener)


def profile_ranks(request: RunRequest, location: StoreLocation, print_options: Sequence[str]
                  ) -> int:
    """Profile on `request.nproc_per_node` ranks of a torchrun job started here: each rank
    runs `accelbench profile --request FILE` (the request as JSON, for one rank each) with
    `print_options`, and rank 0 prints; the job's exit code. The store reaches the ranks
    through their environment, its password as PGPASSWORD, never on a command line."""
    import os

    from accelbench.runner.capacity import check_ranks
    from accelbench.runner.launcher import run_torchrun
    from accelbench.runner.lifeline import owned_folder

    ranks = request.nproc_per_node or 1
    valid = prepare(request)
    kind, _ = valid.device
    if kind == "cpu":  # GPU ranks are checked against the devices by each rank
        warning = check_ranks(ranks, "cpu", 0, request.oversubscribe)
        if warning:
            print(f"accelbench: warning: {warning}", file=sys.stderr)
    environ = dict(os.environ)
    # Set here, torchrun does not print its banner about choosing a count (1 where it
    # is left to choose); a CPU rank also sets its own (profile.session).
    environ.setdefault("OMP_NUM_THREADS", str(_rank_threads(request.threads, ranks)
                                              if kind in ("cpu", "auto") else 1))
    if location.path is not None:
        environ["ACCELBENCH_STORE"] = str(location.path.absolute())
    else:
        assert location.postgres is not None
        environ["ACCELBENCH_STORE"] = location.url_without_secrets or ""
        password = location.postgres.password
        if password is not None:
            environ["PGPASSWORD"] = password.reveal()
    with owned_folder() as folder:
        path = Path(folder) / "request.json"
        path.write_text(request.replace(nproc_per_node=1).to_json(), encoding="utf-8")
        return run_torchrun(ranks, ["profile", "--request", str(path), *print_options],
                            environ)


def _rank_threads(requested: int | None, ranks: int) -> int:
    """The CPU threads of each of `ranks` ranks on this node, as `run` chooses them."""
    from accelbench.runner.capacity import default_threads, split_threads, usable_cpus

    return requested or split_threads(default_threads(usable_cpus()), ranks)


class StoreOnFirstUse:
    """Opens the store only when first asked (under torchrun, only rank 0 asks), and
    closes it on exit."""

    def __init__(self, location: StoreLocation) -> None:
        self._location = location
        self.store: Store | None = None

    def __call__(self) -> Store:
        from accelbench.store import Store

        if self.store is None:
            self.store = Store.open(self._location, create=True)
        return self.store

    def __enter__(self) -> StoreOnFirstUse:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.store is not None:
            self.store.close()


def _run_as_rank(valid: ValidRequest, location: StoreLocation, listener: Listener | None,
                 argv: Sequence[str]) -> Finished | None:
    """Under torchrun: every rank measures; rank 0 stores and reports."""
    from accelbench.runner.rank_session import run_as_rank
    from accelbench.store import Store

    request = valid.request
    with StoreOnFirstUse(location) as store:
        try:
            outcome = run_as_rank(valid, store, argv=argv, listener=listener,
                                  case_timeout=request.case_timeout,
                                  reopen_store=lambda: Store.open(location, create=True))
        finally:
            _closed(listener)
        if outcome is None:
            return None
        return Finished(outcome, store().name, _write_report(request, store(), outcome))


def _check_report(request: RunRequest) -> None:
    from accelbench.report.files import check_writable

    if request.report and not request.no_report:
        check_writable(Path(request.report))


def _write_report(request: RunRequest, store: Store, outcome: Outcome) -> Path | None:
    from accelbench.report.files import default_report_path, write_report

    if request.no_report:
        return None
    path = (Path(request.report) if request.report
            else default_report_path(store.location.files_dir, outcome.run_id))
    return write_report(store.load_run(outcome.run_id), path)


def _closed(listener: Listener | None) -> None:
    """A listener that draws (a progress bar) is done before anything else is printed."""
    close = getattr(listener, "close", None)
    if close is not None:
        close()

"""`accelbench run`: measure a suite or chosen benchmarks, store every case, report.

Long campaigns: `--resume RUN` goes on with a stored run, with the run's own request
(`runner.resume` says which cases it measures); `--repeat N` makes N runs in a row of
one request, each stored as its own run with the same command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from accelbench.cli.options import (
    StoreOnFirstUse,
    add_device,
    add_json,
    add_ranks,
    add_report,
    add_store,
    add_telemetry,
    name_arg,
    names_arg,
    open_store,
    positive_int,
    positive_percentage,
    positive_seconds,
    print_json,
    split_list,
    telemetry_settings,
)
from accelbench.errors import (
    EXIT_CASE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    Terminated,
    UserError,
)

if TYPE_CHECKING:
    from accelbench.runner.plan import Request, ValidRequest
    from accelbench.runner.recorder import Outcome
    from accelbench.runner.resume import Resume

NAME = "run"
HELP = "run a suite (default quick) or chosen benchmarks and store every result"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # No default here (build_request's is "quick"): --resume tells a --suite given.
    parser.add_argument("--suite", type=name_arg,
                        help="quick (default), standard or full")
    parser.add_argument("--bench", nargs="+", type=names_arg, metavar="NAME",
                        help="only these benchmarks (with the suite's grids for them)")
    add_device(parser)
    parser.set_defaults(device=None)  # "auto" (build_request); --resume tells one given
    parser.add_argument("--dtype", nargs="+", type=names_arg, metavar="DTYPE",
                        help="precisions to measure, replacing the suite's: fp64 fp32 tf32 "
                        "fp16 bf16 fp8 int8")
    parser.add_argument("-p", "--param", action="append", metavar="NAME=V[,V]",
                        help="set a parameter for every selected benchmark that has it "
                        "(repeatable; comma-separated values make a grid)")
    parser.add_argument("--max-time", type=positive_seconds, metavar="S",
                        help="seconds of sampling per case (default: the suite's)")
    parser.add_argument("--target-ci", type=positive_percentage, metavar="PCT",
                        help="stop sampling once the median's 95%% CI is within ±PCT%%")
    parser.add_argument("--flush-cache", action="store_true",
                        help="flush device caches before every sample (kernel benchmarks)")
    parser.add_argument("--nproc-per-node", type=positive_int, metavar="N",
                        help="ranks for distributed benchmarks (collectives, data-parallel "
                        "training), started on this node with torchrun (default: as the "
                        "suite says, else 1)")
    add_ranks(parser)
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="CPU threads per process for CPU cases (default: all but one "
                        "of the CPUs this process may use, split between the ranks of a "
                        "distributed case, whatever the host's load); part of each CPU "
                        "case's identity")
    parser.add_argument("--wait-quiet", type=positive_seconds, metavar="S",
                        help="before each case, wait up to S seconds for the host to be quiet "
                        "(no other busy process, no steal time)")
    add_telemetry(parser)
    parser.add_argument("--timeout", type=positive_seconds, metavar="S",
                        help="fail a case that takes longer than this (default: per benchmark)")
    parser.add_argument("--resume", metavar="RUN",
                        help="go on with a stored run that was interrupted, killed or had "
                        "failed cases (a run id, a unique prefix, or latest): its cases "
                        "that failed or were not reached are measured and added to the same "
                        "run, with the run's own request; only on the stack it was measured "
                        "on")
    parser.add_argument("--repeat", type=positive_int, metavar="N",
                        help="make N runs in a row of the same request, each stored as its "
                        "own run (default: the suite's, else 1); Ctrl-C stops them all")
    add_report(parser)
    add_store(parser)
    add_json(parser)


# What --resume may be given with: where the run is stored and reported, and how it is
# printed. Every other option would change the request, which is the stored run's own.
_BESIDE_RESUME = frozenset({"resume", "store", "report", "no_report", "json"})

# Exit codes of runs, from best to worst: --repeat exits with its worst run's.
EXIT_ORDER = (EXIT_OK, EXIT_CASE_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED)


def worst_exit_code(codes: Sequence[int]) -> int:
    """The worst of several runs' exit codes: interrupted (SIGTERM, then Ctrl-C) over
    failed over ok; a code outside EXIT_ORDER is worse than any."""
    def rank(code: int) -> int:
        return EXIT_ORDER.index(code) if code in EXIT_ORDER else len(EXIT_ORDER)

    return max(codes, key=rank, default=EXIT_OK)


def parse_overrides(items: Sequence[str] | None) -> dict[str, tuple[str, ...]]:
    """Each `-p NAME=TEXT` as written, gathered by name (repeating -p adds values); how
    TEXT splits into values is the parameter's to say (runner.plan.given_values)."""
    out: dict[str, tuple[str, ...]] = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise UserError(f"--param expects NAME=VALUE[,VALUE], got {item!r}")
        out[name.strip()] = (*out.get(name.strip(), ()), text.strip())
    return out


def check_writable(path: Path) -> None:
    """Refuse, before anything is measured, a report file that could not be written
    after: a folder in its place, or no folder it can be written in (the missing folders
    of its path are created then, so the nearest existing one must take a file).

    Permissions are tried, not read from mode bits: root passes every access() check,
    and a read-only or virtual file system (/proc) refuses what the bits allow. An
    existing path that is not a regular file (a FIFO, a socket, a device) is refused
    before it is opened: opening a FIFO with no reader blocks forever."""
    import stat
    import tempfile

    if path.is_dir():
        raise UserError(f"--report {path}: is a folder, not a file")
    try:
        if path.exists():
            if not stat.S_ISREG(path.stat().st_mode):
                raise UserError(f"--report {path}: is not a regular file")
            with path.open("ab"):  # appends nothing: the file is left as it is
                return
        folder = path.absolute().parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            raise UserError(f"--report {path}: {folder} is not a folder")
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UserError(f"--report {path}: cannot be written: {exc.strerror or exc}") from None


def build_request(args: argparse.Namespace) -> Request:
    """The typed request of the options (their types have checked each value)."""
    from accelbench.runner.plan import Request

    timing: dict[str, Any] = {}
    if args.max_time is not None:
        timing["max_time"] = args.max_time
    if args.target_ci is not None:
        timing["target_rel_ci"] = args.target_ci / 100.0
    if args.flush_cache:
        timing["flush_cache"] = True
    return Request(
        suite=args.suite or "quick",
        benches=split_list(args.bench),
        overrides=parse_overrides(args.param),
        dtypes=split_list(args.dtype),
        device=args.device or "auto",
        timing={**timing, **telemetry_settings(args)},
        nproc_per_node=args.nproc_per_node,
        backend=args.backend,
        threads=args.threads,
        wait_quiet=args.wait_quiet,
        oversubscribe=args.oversubscribe,
    )


# What a command prints of a finished run, and its exit code: (args, outcome, where the
# store is, the report written or None) -> exit code.
Finish: TypeAlias = Callable[[argparse.Namespace, "Outcome", str, "Path | None"], int]


def run(args: argparse.Namespace) -> int:
    from accelbench.benchmarks import REGISTRY
    from accelbench.runner.plan import validate

    if args.resume is not None:
        return _resume(args)
    # Bad names and values fail here, once, before anything starts or the store is opened.
    valid = validate(build_request(args), REGISTRY)
    times = args.repeat or valid.suite.repeat
    if times > 1:
        return _repeat(args, valid, times)
    return run_request(args, valid, _finish, args.timeout)


def _repeat(args: argparse.Namespace, valid: ValidRequest, times: int) -> int:
    """`times` runs in a row of one request, each its own run with the same command line,
    so that they compare; Ctrl-C (or SIGTERM) stops the sequence, what was stored is kept.
    Exits with the worst run's code (`worst_exit_code`); with --json, prints one document
    holding every run's."""
    from accelbench.runner.distributed import launched_by_torchrun

    if launched_by_torchrun():
        raise UserError("--repeat starts its runs one after another: under torchrun, start "
                        "the job again for each run")
    if args.report and not args.no_report:
        raise UserError("--report names one file: with --repeat each run writes its own "
                        "report beside the store (or none, with --no-report)")
    printed: list[dict[str, Any]] = []
    made: list[str] = []  # each run made: its id and status

    def finish(args: argparse.Namespace, outcome: Outcome, store_location: str,
               report: Path | None) -> int:
        made.append(f"{outcome.run_id} {outcome.status}")
        if args.json:
            printed.append(outcome_json(outcome, store_location, report))
            return outcome.exit_code
        return _finish(args, outcome, store_location, report)

    codes: list[int] = []
    for number in range(1, times + 1):
        print(f"accelbench: run {number}/{times} of the repeated request", file=sys.stderr,
              flush=True)
        try:
            codes.append(run_request(args, valid, finish, args.timeout))
        except KeyboardInterrupt as stop:  # outside the cases: what was stored is kept
            codes.append(EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED)
        if codes[-1] in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            break
    print(f"accelbench: {len(made)} of {times} runs made: {', '.join(made) or 'none'}",
          file=sys.stderr)
    if args.json:
        print_json({"runs": printed})
    return worst_exit_code(codes)


def _resume(args: argparse.Namespace) -> int:
    """Go on with the stored run `args.resume` (`runner.resume`), with its own request."""
    from accelbench.benchmarks import REGISTRY
    from accelbench.runner.distributed import launched_by_torchrun
    from accelbench.runner.plan import validate
    from accelbench.runner.resume import Resume

    given = _request_options_given(args)
    if given:
        raise UserError(f"--resume goes on with the run's own request: leave out "
                        f"{', '.join(given)}")
    if launched_by_torchrun():
        # Only rank 0 reads the store, and every rank must plan the same cases.
        raise UserError("--resume is not supported under torchrun: start a new run there")
    with open_store(args, create=False) as reader:
        resume = Resume(reader.load_run(args.resume))
    record = resume.run.record
    if resume.complete:
        print(f"accelbench: run {record.id} is complete: nothing to resume", file=sys.stderr)
        return EXIT_OK
    stored = stored_request(record.id, record.argv)
    valid = validate(build_request(stored), REGISTRY)
    print(f"accelbench: resuming run {record.id} ({record.status}): {len(resume.kept)} "
          f"stored case(s) kept", file=sys.stderr, flush=True)
    return run_request(args, valid, _finish, stored.timeout, resume)


def stored_request(run_id: str, argv: Sequence[str]) -> argparse.Namespace:
    """The options of a run's stored command line, read by the options `run` has; a
    UserError for a run that `accelbench run` did not make."""
    if not argv or argv[0] != NAME:
        made_by = f"`accelbench {argv[0]}`" if argv else "no command line that was stored"
        raise UserError(f"run {run_id} was made by {made_by}: only a run of `accelbench run` "
                        "can be resumed")
    parser = _StoredLine(prog=f"run {run_id}: its stored command line", add_help=False)
    add_arguments(parser)
    return parser.parse_args(list(argv[1:]))


class _StoredLine(argparse.ArgumentParser):
    """A stored command line that does not read is the run's problem: one line."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{self.prog}: {message}")


def _request_options_given(args: argparse.Namespace) -> list[str]:
    """The options given that --resume refuses (`_BESIDE_RESUME`), as written."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return [action.option_strings[-1] for action in parser._actions
            if action.option_strings and action.dest not in _BESIDE_RESUME
            and getattr(args, action.dest, action.default) != action.default]


def run_request(args: argparse.Namespace, valid: ValidRequest, finish: Finish,
                case_timeout: float | None = None, resume: Resume | None = None) -> int:
    """Measure a validated request, store every case, write the report (`args.report`,
    `args.no_report`, `args.store`) and let `finish` print it: `run` and `validate`.
    With `resume`, go on with that stored run instead of beginning one."""
    from accelbench.report.terminal import console
    from accelbench.runner.distributed import launched_by_torchrun
    from accelbench.runner.session import run_session

    if args.report and not args.no_report:
        check_writable(Path(args.report))
    err = console(stderr=True)
    listener = TerminalListener(err)
    if launched_by_torchrun():
        return _run_as_rank(args, valid, listener, finish, case_timeout)
    with open_store(args, create=True) as store:
        outcome = run_session(valid, store, argv=sys.argv[1:], listener=listener,
                              case_timeout=case_timeout, resume=resume)
        listener.close()
        report = _write_report(args, store, outcome)
        store_location = store.name
    return finish(args, outcome, store_location, report)


def _run_as_rank(args: argparse.Namespace, valid: ValidRequest, listener: TerminalListener,
                 finish: Finish, case_timeout: float | None) -> int:
    """Under torchrun: every rank measures; rank 0 stores, reports and prints."""
    from accelbench.runner.rank_session import run_as_rank

    with StoreOnFirstUse(args) as store:
        outcome = run_as_rank(valid, store, argv=sys.argv[1:], listener=listener,
                              case_timeout=case_timeout,
                              reopen_store=lambda: open_store(args, create=True))
        listener.close()
        if outcome is None:
            return 0
        report = _write_report(args, store(), outcome)
        return finish(args, outcome, store().name, report)


def _write_report(args: argparse.Namespace, store: Any, outcome: Any) -> Path | None:
    from accelbench.cli.report_cmd import default_report_path, write_report

    if args.no_report:
        return None
    path = Path(args.report) if args.report else default_report_path(store.location.files_dir,
                                                                        outcome.run_id)
    return write_report(store.load_run(outcome.run_id), path)


def outcome_json(outcome: Outcome, store_location: str, report: Path | None,
                 **extra: Any) -> dict[str, Any]:
    """A finished run as `--json` prints it: the run, where it is stored and reported,
    what a command adds (`extra`), and every measurement."""
    return {
        "run_id": outcome.run_id,
        "status": outcome.status,
        "generation_key": outcome.fingerprint.generation_key,
        "store": str(store_location),
        "report": str(report) if report else None,
        # A resumed run: how many of its measurements were stored before and kept.
        **({"resumed": True, "kept": outcome.kept} if outcome.resumed else {}),
        **extra,
        "measurements": [m.export_dict() for m in outcome.measurements],
    }


def _finish(args: argparse.Namespace, outcome: Outcome, store_location: str,
            report: Path | None) -> int:
    from accelbench.report.run_view import run_sections
    from accelbench.report.terminal import console, print_sections
    from accelbench.report.text import text

    if args.json:
        print_json(outcome_json(outcome, store_location, report))
    else:
        out = console()
        out.print(text(f"Run {outcome.run_id}: {outcome.fingerprint.generation_key}"))
        print_sections(run_sections(outcome.measurements), out)
        failed = len(outcome.failed)
        summary = f"{len(outcome.measurements)} cases, {failed} failed" + (
            f" ({outcome.kept} kept from before the resume)" if outcome.resumed else "") + (
            " (interrupted)" if outcome.interrupted else "")
        out.print(summary)
        out.print(text(f"Stored in {store_location} as run {outcome.run_id}"))
        if report:
            out.print(text(f"Report: {report}"))
    return outcome.exit_code


class TerminalListener:
    """Progress on stderr: a bar on a terminal, one line per finished case everywhere."""

    def __init__(self, err: Any) -> None:
        self._err = err
        self._progress: Any = None
        self._task: Any = None
        self._total = 0

    def planned(self, cases: Sequence[Any], fingerprint: Any, run_id: str) -> None:
        self._total = len(cases)
        from accelbench.report.text import text

        self._err.print(text(f"accelbench: run {run_id} on {fingerprint.generation_key}: "
                             f"{self._total} cases"))
        if self._err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                                      MofNCompleteColumn(), console=self._err, transient=True)
            self._task = self._progress.add_task("starting", total=self._total)
            self._progress.start()

    def started(self, index: int, planned: Any) -> None:
        if self._progress is not None:
            from accelbench.report.text import printable

            self._progress.update(self._task, description=printable(planned.case.label))

    def finished(self, index: int, measurement: Any) -> None:
        from accelbench.report.results import row
        from accelbench.report.text import text

        r = row(measurement)
        detail = r.result if r.ok else f"{r.status}: {r.note}"
        if r.ok and r.ci != "-":
            detail += f" {r.ci}"
        if r.ok and r.status != "ok":
            detail += r.status[2:]  # " (noisy, contended)"
        mark = {"ok": "✓", "failed": "✗", "skipped": "-"}.get(measurement.status, "?")
        label = f"{measurement.case.benchmark} {r.params}".strip()
        self._err.print(text(f"  [{index + 1}/{self._total}] {mark} {label}: {detail}"))
        if self._progress is not None:
            self._progress.advance(self._task)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()

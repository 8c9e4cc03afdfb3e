"""`accelbench run`: measure a suite or chosen benchmarks, store every case, report.

A thin adapter: its options make a `RunRequest` (cli.request_options), or `--request
FILE` reads one, and `runner.app` runs it. Long campaigns: `--resume RUN` goes on with a
stored run, with the run's own stored request (`runner.resume` says which cases it
measures); `--repeat N` makes N runs in a row of one request, each stored as its own run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accelbench.cli.options import add_json, add_store, print_json, store_location
from accelbench.cli.progress import add_quiet
from accelbench.cli.request_options import (
    add_request_file,
    add_request_options,
    given_or_read,
    refuse_beside,
    request_of,
)
from accelbench.errors import (
    EXIT_CASE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    Terminated,
)

if TYPE_CHECKING:
    from accelbench.app import Finished
    from accelbench.core.request import RunRequest

NAME = "run"
HELP = "run a suite (default quick) or chosen benchmarks and store every result"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_request_options(parser)
    parser.add_argument("--resume", metavar="RUN",
                        help="go on with a stored run that was interrupted, killed or had "
                        "failed cases (a run id, a unique prefix, or latest): its cases "
                        "that failed or were not reached are measured and added to the same "
                        "run, with the run's own request; only on the stack it was measured "
                        "on")
    add_request_file(parser, NAME)
    add_store(parser)
    add_json(parser)
    add_quiet(parser)


# What --resume may be given with: where the run is stored and reported, and how it is
# printed. Every other option would change the request, which is the stored run's own.
_BESIDE_RESUME = frozenset({"resume", "store", "report", "no_report", "json", "quiet"})

# Exit codes of runs, from best to worst: --repeat exits with its worst run's.
EXIT_ORDER = (EXIT_OK, EXIT_CASE_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED)


def worst_exit_code(codes: Sequence[int]) -> int:
    """The worst of several runs' exit codes: interrupted (SIGTERM, then Ctrl-C) over
    failed over ok; a code outside EXIT_ORDER is worse than any."""
    def rank(code: int) -> int:
        return EXIT_ORDER.index(code) if code in EXIT_ORDER else len(EXIT_ORDER)

    return max(codes, key=rank, default=EXIT_OK)


def run(args: argparse.Namespace) -> int:
    if args.resume is not None:
        refuse_beside(args, add_arguments, _BESIDE_RESUME,
                      "--resume goes on with the run's own request")
        return _resume(args)
    return run_and_print(given_or_read(args, request_of, add_arguments), args)


def run_and_print(request: RunRequest, args: argparse.Namespace) -> int:
    """Make the runs `request` asks for and print each as `run` does; the exit code of
    the worst (`--repeat`). With --json, one document for a single run, and one holding
    every run's for several."""
    from accelbench.app import repeats, runs
    from accelbench.cli.progress import progress_listener

    location = store_location(args)
    times = repeats(request)
    listener = progress_listener(args)

    def announce(number: int, times: int) -> None:
        print(f"accelbench: run {number}/{times} of the repeated request", file=sys.stderr,
              flush=True)

    printed: list[dict[str, Any]] = []
    made: list[str] = []  # each run made: its id and status
    codes: list[int] = []
    started = runs(request, location, listener, argv=sys.argv[1:],
                   announce=announce if times > 1 else None)
    while True:
        try:
            finished = next(started, None)
        except KeyboardInterrupt as stop:
            if times == 1:
                raise
            # Between or outside the cases: what was stored is kept, the sequence ends.
            codes.append(EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED)
            break
        if finished is None:
            break
        made.append(f"{finished.outcome.run_id} {finished.outcome.status}")
        codes.append(finished.exit_code)
        if times == 1:
            return print_finished(finished, args.json)
        if args.json:
            from accelbench.cli.printing import finished_json

            printed.append(finished_json(finished))
        else:
            print_finished(finished, False)
    if times == 1:
        return 0  # a rank other than 0: rank 0 prints
    print(f"accelbench: {len(made)} of {times} runs made: {', '.join(made) or 'none'}",
          file=sys.stderr)
    if args.json:
        print_json({"runs": printed})
    return worst_exit_code(codes)


def _resume(args: argparse.Namespace) -> int:
    """Go on with the stored run `args.resume` (runner.app.resume), with its own request."""
    from accelbench.app import resume
    from accelbench.cli.progress import progress_listener

    finished = resume(args.resume, store_location(args), progress_listener(args),
                      report=args.report, no_report=args.no_report, argv=sys.argv[1:])
    if finished is None:
        return EXIT_OK  # complete: nothing to resume
    return print_finished(finished, args.json)


def print_finished(finished: Finished, as_json: bool) -> int:
    """A finished run as `run` prints it; its exit code."""
    from accelbench.cli.printing import finished_json, print_run

    outcome = finished.outcome
    if as_json:
        print_json(finished_json(finished))
    else:
        summary = f"{len(outcome.measurements)} cases, {len(outcome.failed)} failed" + (
            f" ({outcome.kept} kept from before the resume)" if outcome.resumed else "") + (
            " (interrupted)" if outcome.interrupted else "")
        print_run(finished, "Run", summary)
    return finished.exit_code

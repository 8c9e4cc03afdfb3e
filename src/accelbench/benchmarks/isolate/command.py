"""`accelbench isolate`: which node or link is bad? Measure every pair of nodes and of
ranks within a node, in passes until the naming holds still, store the run, print the
matrices and what the rule names; the exit code is 1 when it names a node, rank or link
conclusively, 9 when the passes did not settle (inconclusive)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    add_device,
    add_json,
    add_ranks,
    add_report,
    add_store,
    finite_float,
    name_arg,
    non_negative_int,
    positive_int,
    positive_seconds,
    print_json,
    store_location,
)
from accelbench.cli.progress import add_quiet
from accelbench.cli.request_options import add_request_file
from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE, NodesError

if TYPE_CHECKING:
    from accelbench.app import Finished
    from accelbench.core.request import RunRequest, Value

NAME = "isolate"
HELP = ("name the slow node or link: latency and bandwidth of every pair of nodes and of "
        "ranks within a node, in passes until the naming holds still, judged by a "
        "median-and-MAD rule; exit 1 if one is named, 9 if the passes did not settle")
BENCH = "isolate"
NO_PAIRS = ("isolate measures pairs, and one rank on one node makes none: give "
            "--nproc-per-node 2 or more, or start it under torchrun on 2 or more nodes")
# Option -> the benchmark's parameter it sets.
PARAMS = {"bytes": "bytes", "latency_bytes": "latency_bytes", "samples": "samples",
          "iters": "iters", "warmup": "warmup", "min_busbw": "min_busbw", "agree": "agree",
          "max_passes": "max_passes", "budget": "budget"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device(parser)
    parser.add_argument("--nproc-per-node", type=positive_int, metavar="N",
                        help="ranks started on this node with torchrun (local pairs); "
                        "across nodes start `torchrun ... -m accelbench isolate` instead")
    add_ranks(parser)
    parser.add_argument("--bytes", type=name_arg, metavar="SIZE",
                        help="message of the bandwidth figures, K/M/G suffixes (default 4M)")
    parser.add_argument("--latency-bytes", type=name_arg, metavar="SIZE",
                        help="message of the ping-pong latency (default 8)")
    parser.add_argument("--samples", type=positive_int, metavar="N",
                        help="timed samples per pair and figure (default 5)")
    parser.add_argument("--iters", type=non_negative_int, metavar="N",
                        help="calls per sample (default 0: sized by time)")
    parser.add_argument("--warmup", type=non_negative_int, metavar="N",
                        help="calls before timing, per pair and figure (default 2)")
    parser.add_argument("--agree", type=positive_int, metavar="N",
                        help="passes in a row that must name the same for a conclusive "
                        "naming (default 3)")
    parser.add_argument("--max-passes", type=positive_int, metavar="N",
                        help="passes at most; not settled by then is inconclusive "
                        "(default 10)")
    parser.add_argument("--budget", type=positive_seconds, metavar="S",
                        help="seconds of passes: none is begun that would end past it; "
                        "not settled by then is inconclusive (default 120)")
    parser.add_argument("--serial", action="store_true",
                        help="measure one pair at a time (default: rounds of disjoint pairs "
                        "at once, which share the fabric)")
    parser.add_argument("--min-busbw", type=finite_float(at_least=0, what="B/s"),
                        metavar="B/S",
                        help="a pair below this bandwidth (B/s) is a slow link, whatever the "
                        "others measure; the only way to call the one link of two nodes slow")
    parser.add_argument("--timeout", type=positive_seconds, metavar="S",
                        help="fail the measurement if it takes longer (default 600 s)")
    add_report(parser)
    add_request_file(parser, NAME)
    add_store(parser)
    add_json(parser)
    add_quiet(parser)


def build_request(args: argparse.Namespace) -> RunRequest:
    """The request of isolate's options (their types have checked each value)."""
    from accelbench.core.request import RunRequest

    values: dict[str, tuple[Value, ...]] = {}
    for option, param in PARAMS.items():
        value = getattr(args, option)
        if value is not None:
            values[param] = (value,)
    if args.serial:
        values["serial"] = (True,)
    return RunRequest(command=NAME, benches=(BENCH,), values=values, device=args.device,
                      timing={"processes": 1}, nproc_per_node=args.nproc_per_node,
                      backend=args.backend, oversubscribe=args.oversubscribe,
                      case_timeout=args.timeout, report=args.report,
                      no_report=args.no_report)


def run(args: argparse.Namespace) -> int:
    from accelbench import app
    from accelbench.cli.progress import progress_listener
    from accelbench.cli.request_options import given_or_read
    from accelbench.runner.distributed import launched_by_torchrun, torchrun_number

    # Bad names and values fail here, before anything starts or the store is opened.
    request = given_or_read(args, build_request, add_arguments)
    ranks = (torchrun_number("WORLD_SIZE", at_least=1) if launched_by_torchrun()
             else request.nproc_per_node or 1)
    if ranks < 2:
        raise NodesError(NO_PAIRS)
    finished = app.run(request, store_location(args), progress_listener(args),
                       argv=sys.argv[1:])
    if finished is None:
        return 0  # a rank other than 0: rank 0 prints
    return _finish(args, finished)


def _finish(args: argparse.Namespace, finished: Finished) -> int:
    from accelbench.benchmarks.isolate.results import isolate_results
    from accelbench.benchmarks.isolate.view import verdict_lines
    from accelbench.cli.printing import finished_json, print_run

    outcome = finished.outcome
    results = isolate_results(outcome.measurements)
    named = [n for r in results if r.verdict.conclusive for n in r.verdict.names()]
    undecided = [r for r in results if not r.verdict.conclusive]
    if args.json:
        print_json(finished_json(
            finished, named=named, conclusive=not undecided,
            verdicts=[{"nodes": r.nodes, "lines": verdict_lines(r),
                       "conclusive": r.verdict.conclusive, **r.verdict.to_dict()}
                      for r in results]))
    else:
        print_run(finished, "Isolate", "")
    if outcome.exit_code:
        return outcome.exit_code
    if named:
        return EXIT_CASE_FAILED
    return EXIT_INCONCLUSIVE if undecided else 0

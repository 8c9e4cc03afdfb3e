"""`accelbench baseline`: write what a healthy node measures, from a set of runs."""

from __future__ import annotations

import argparse

from accelbench.cli.options import add_json, add_store, open_store, path_arg, print_json

NAME = "baseline"
HELP = "write a baseline file (the median node, robust to outliers) from a set of runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="runs or filters (default: every stored run; the latest run of "
                        "each host and device is used); all of one stack")
    parser.add_argument("-o", "--output", type=path_arg, required=True, metavar="FILE",
                        help="the baseline file to write (JSON)")
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.analysis.baseline import fleet_median, write_baseline
    from accelbench.analysis.select import select_runs
    from accelbench.errors import UserError
    from accelbench.report.text import printable

    with open_store(args, create=False) as store:
        runs = select_runs(store, args.runs)
    stacks = sorted({r.record.generation_key for r in runs})
    if len(stacks) > 1:
        raise UserError(f"the runs are of {len(stacks)} stacks ({'; '.join(stacks)}): "
                        "select one, e.g. with gen=GLOB")
    result = fleet_median(runs)
    write_baseline(result, args.output)
    outliers = sorted({n for c in result.cases.values() for n in c.outliers})
    summary = {
        "output": args.output, "source": result.source, "generation_keys": stacks,
        "nodes": len(result.runs), "cases": len(result.cases), "outlier_nodes": outliers,
    }
    if args.json:
        print_json(summary)
        return 0
    print(printable(f"Baseline of {len(result.runs)} node(s) on {stacks[0]}: "
                    f"{len(result.cases)} cases, written to {args.output}"))
    if outliers:
        print(printable(f"Left out of the spread where they stood apart: {', '.join(outliers)}"))
    return 0

"""`accelbench baseline`: write what a healthy node measures, from a set of runs."""

from __future__ import annotations

import argparse

from accelbench.cli.options import add_json, add_store, open_store, path_arg, print_json

NAME = "baseline"
HELP = "write a baseline file (the median node, robust to outliers) from a set of runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="runs or filters (default: every stored run; each host and "
                        "device counts by its newest measurement of each case among them); "
                        "all of one stack")
    parser.add_argument("-o", "--output", type=path_arg, required=True, metavar="FILE",
                        help="the baseline file to write (JSON)")
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.analysis.baseline import nodes_median, write_baseline
    from accelbench.analysis.latest import node_states
    from accelbench.analysis.select import select_runs
    from accelbench.errors import UserError
    from accelbench.report.text import printable

    with open_store(args, create=False) as store:
        runs = select_runs(store, args.runs)
    stacks = sorted({r.record.generation_key for r in runs})
    if len(stacks) > 1:
        raise UserError(f"the runs are of {len(stacks)} stacks ({'; '.join(stacks)}): "
                        "select one, e.g. with gen=GLOB")
    nodes = node_states(runs)
    result = nodes_median(nodes)
    write_baseline(result, args.output)
    outliers = sorted({n for c in result.cases.values() for n in c.outliers})
    summary = {
        "output": args.output, "source": result.source, "generation_keys": stacks,
        "nodes": len(nodes), "cases": len(result.cases), "outlier_nodes": outliers,
    }
    if args.json:
        print_json(summary)
        return 0
    print(printable(f"Baseline of {len(nodes)} node(s) on {stacks[0]}: "
                    f"{len(result.cases)} cases from {len(result.runs)} run(s), written to "
                    f"{args.output}"))
    if outliers:
        print(printable(f"Left out of the spread where they stood apart: {', '.join(outliers)}"))
    return 0

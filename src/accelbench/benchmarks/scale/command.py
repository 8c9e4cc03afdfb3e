"""`accelbench scaling`: scaling efficiency of the training-at-scale benchmarks across
ranks and nodes, and the node, rank or link that drags it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from accelbench.cli.options import add_json, add_store, name_arg, open_store, path_arg, print_json

if TYPE_CHECKING:
    from accelbench.benchmarks.scale.scaling import Scaling

NAME = "scaling"
HELP = ("scaling efficiency of train-fsdp, train-tp, train-pp and train-2d against ranks, "
        "with the node, rank or link that drags it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="runs or filters to include (default: every stored run)")
    parser.add_argument("--bench", type=name_arg, metavar="NAME",
                        help="only this benchmark (train-fsdp, train-tp, train-pp, train-2d)")
    parser.add_argument("--chart", type=path_arg, metavar="FILE",
                        help="also write the efficiency chart: a PNG image when FILE ends "
                        "in .png, else an SVG file")
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.analysis.select import select_runs
    from accelbench.benchmarks.scale.scaling import NAMES, scaling
    from accelbench.errors import UserError

    with open_store(args, create=False) as store:
        runs = select_runs(store, args.runs)
    benchmarks = (args.bench,) if args.bench else ()
    result = scaling(runs, benchmarks=benchmarks)
    if not result.series:
        raise UserError(f"no measured case of {', '.join(benchmarks or NAMES)} "
                        "in the selected runs")
    if args.chart:
        _write_chart(result, args.chart)
    if args.json:
        print_json(result.to_dict())
        return 0
    from accelbench.benchmarks.scale.view import table
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console

    render_rich([table(result)], console())
    return 0


def _write_chart(result: Scaling, path: str) -> None:
    from pathlib import Path

    from accelbench.benchmarks.scale.view import chart
    from accelbench.errors import UserError
    from accelbench.report import charts

    lines = chart(result)
    try:
        if path.lower().endswith(".png"):
            Path(path).write_bytes(charts.lines_png(lines))
        else:
            svg = charts.line_chart("scaling", lines.series, xlabel=lines.xlabel,
                                    ylabel=lines.ylabel, title=lines.title, logx=lines.logx,
                                    standalone=True)
            Path(path).write_text(svg, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None

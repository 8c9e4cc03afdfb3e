"""`accelbench generations`: headline figures per stack generation, against a baseline one."""

from __future__ import annotations

import argparse

from accelbench.cli.options import (
    add_exclude_contended,
    add_exclude_throttled,
    add_json,
    add_store,
    name_arg,
    names_arg,
    open_store,
    path_arg,
    print_json,
    split_list,
)

NAME = "generations"
HELP = "throughput per stack generation (device, ROCm/CUDA, PyTorch), normalised to a baseline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="runs or filters to include (default: every stored run)")
    parser.add_argument("--baseline", type=name_arg, metavar="GEN",
                        help="generation key or glob to normalise to (default: the oldest)")
    parser.add_argument("--family", type=name_arg,
                        help="benchmark family (default: model when there are "
                        "model results, else every family)")
    parser.add_argument("--model", nargs="+", type=names_arg, metavar="GLOB",
                        help="only these models")
    parser.add_argument("--dtype", nargs="+", type=names_arg, metavar="DTYPE",
                        help="only these precisions")
    parser.add_argument("--mode", type=name_arg, default="train",
                        help="train (default), infer or all: cases with a 'mode' parameter")
    parser.add_argument("--case", type=name_arg, metavar="PATTERN",
                        help="only cases matching 'BENCH [NAME=GLOB ...]'")
    parser.add_argument("--chart", type=path_arg, metavar="FILE",
                        help="also write the chart as an SVG file")
    add_exclude_contended(parser)
    add_exclude_throttled(parser)
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.analysis.generations import generations
    from accelbench.analysis.select import (
        exclude_contended,
        exclude_throttled,
        parse_case_pattern,
        select_runs,
    )
    from accelbench.benchmarks import REGISTRY
    from accelbench.errors import UserError

    families = REGISTRY.families
    if args.family and args.family not in families:
        raise UserError(f"unknown family {args.family!r} (families: {', '.join(families)})")
    pattern = parse_case_pattern(args.case) if args.case else None
    with open_store(args, create=False) as store:
        runs = select_runs(store, args.runs)
    if args.exclude_contended:
        runs = exclude_contended(runs)
    if args.exclude_throttled:
        runs = exclude_throttled(runs)
    result = generations(
        runs, baseline=args.baseline, family=args.family, models=split_list(args.model),
        dtypes=split_list(args.dtype), mode=None if args.mode == "all" else args.mode,
        cases=pattern,
    )
    if not result.rows:
        raise UserError("no measured case matches these filters in the selected runs")
    if args.chart:
        _write_chart(result, args.chart)
    if args.json:
        print_json(result.to_dict())
        return 0
    from accelbench.report.analysis_tables import generations_table
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console

    render_rich([generations_table(result)], console())
    return 0


def _write_chart(result: object, path: str) -> None:
    from pathlib import Path

    from accelbench.errors import UserError
    from accelbench.report.html import generation_chart

    svg = generation_chart(result, "generations", standalone=True).svg
    try:
        Path(path).write_text(svg, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None

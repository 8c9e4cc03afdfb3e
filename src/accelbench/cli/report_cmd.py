"""`accelbench report [RUN...]`: write an HTML (or Markdown) report of stored runs."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from accelbench.cli.options import add_store, check_percent, open_store, path_arg, percentage

NAME = "report"
HELP = "write an HTML (or Markdown) report of stored runs (default: the latest)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="run ids, prefixes, 'latest' (default), stack globs or FIELD=GLOB "
                        "filters; with several, the first is compared with each other one")
    parser.add_argument("--format", choices=("html", "md"),
                        help="html or md (default: from the file name; md on standard output, "
                        "html otherwise)")
    parser.add_argument("-o", "--output", type=path_arg, metavar="FILE",
                        help="where to write it ('-' for standard output; default: "
                        "reports/RUN.html beside the store)")
    parser.add_argument("--min-effect", type=percentage, default=5.0, metavar="PCT",
                        help="smallest change a comparison reports (default 5)")
    add_store(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    from accelbench.analysis.select import select_group
    from accelbench.report.files import (
        default_report_path,
        format_for,
        render_groups,
        report_path,
        write_text,
    )

    check_percent(args.min_effect, "--min-effect")
    refs = args.runs or ["latest"]
    fmt = args.format or format_for(args.output)
    with open_store(args, create=False) as store:
        groups = [select_group(store, ref) for ref in refs]
        profiles = {r.record.id: store.found_for_run(r.record.id)
                    for g in groups for r in g.runs}
        text = render_groups(groups, fmt, min_effect=args.min_effect / 100, profiles=profiles)
        if args.output == "-":
            sys.stdout.write(text)
            return 0
        if args.output:
            path = Path(args.output)
        elif len(groups) == 1 and len(groups[0].runs) == 1:
            path = default_report_path(store.location.files_dir, groups[0].runs[0].record.id, fmt)
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            path = report_path(store.location.files_dir / "reports", f"report-{stamp}", fmt)
    write_text(path, text)
    print(f"Report: {path}")
    return 0

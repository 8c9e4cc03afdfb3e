"""`accelbench report [RUN]`: write a report file of a stored run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from accelbench.cli.options import add_store, open_store

NAME = "report"
HELP = "write a Markdown report of a stored run (default: the latest)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", default="latest", help="run id, prefix or 'latest'")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="where to write it ('-' for standard output; default: "
                        "reports/RUN.md beside the store)")
    add_store(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    with open_store(args, create=False) as store:
        stored = store.load_run(args.run)
        if args.output == "-":
            sys.stdout.write(render(stored))
            return 0
        path = (Path(args.output) if args.output
                else default_report_path(store.path, stored.record.id))
        write_report(stored, path)
    print(f"Report: {path}")
    return 0


def default_report_path(store_path: Path, run_id: str) -> Path:
    return Path(store_path).parent / "reports" / f"{run_id}.md"


def render(stored: Any) -> str:
    from accelbench.report.markdown import run_report

    return run_report(stored.record, stored.fingerprint, stored.measurements)


def write_report(stored: Any, path: Path) -> Path:
    from accelbench.errors import UserError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(stored), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the report to {path}: {exc.strerror}") from None
    return path

"""`accelbench export`: stored runs as JSON (complete, reloadable) or CSV (the figures, for
spreadsheets, with stored text made printable)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any

from accelbench.cli.options import add_store, open_store, path_arg

NAME = "export"
HELP = "export stored runs (default: all) as JSON or CSV"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN", help="run ids, prefixes or 'latest'")
    parser.add_argument("--format", choices=("json", "csv"), default="json")
    parser.add_argument("-o", "--output", type=path_arg, metavar="FILE",
                        help="write here instead of stdout")
    add_store(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.errors import UserError

    with open_store(args, create=False) as store:
        refs = args.runs or [r.id for r in store.list_runs()]
        stored = [store.load_run(ref) for ref in refs]
    if not args.output:
        _write(args.format, stored, sys.stdout)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            _write(args.format, stored, out)
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror}") from None
    return 0


def _write(fmt: str, stored: list[Any], out: IO[str]) -> None:
    if fmt == "json":
        from accelbench.store.export import export_json

        json.dump(export_json(stored), out, indent=2, default=str)
        out.write("\n")
    else:
        from accelbench.report.csv_table import write_csv

        write_csv(stored, out)

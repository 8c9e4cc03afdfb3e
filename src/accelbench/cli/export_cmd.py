"""`accelbench export`: stored runs as JSON or CSV."""

from __future__ import annotations

import argparse
import json
import sys

from accelbench.cli.options import add_store, open_store

NAME = "export"
HELP = "export stored runs (default: all) as JSON or CSV"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN", help="run ids, prefixes or 'latest'")
    parser.add_argument("--format", choices=("json", "csv"), default="json")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    add_store(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.errors import UserError
    from accelbench.store.export import export_json, write_csv

    with open_store(args, create=False) as store:
        refs = args.runs or [r.id for r in store.list_runs()]
        stored = [store.load_run(ref) for ref in refs]
    try:
        out = open(args.output, "w", encoding="utf-8", newline="") if args.output else sys.stdout
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror}") from None
    try:
        if args.format == "json":
            json.dump(export_json(stored), out, indent=2, default=str)
            out.write("\n")
        else:
            write_csv(stored, out)
    finally:
        if out is not sys.stdout:
            out.close()
    return 0

"""`accelbench show RUN`: one stored run, its stack and its results."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from accelbench.cli.options import add_json, add_store, open_store, print_json

if TYPE_CHECKING:
    from accelbench.store import StoredRun

NAME = "show"
HELP = "show one stored run (an id, a unique prefix, or 'latest')"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", default="latest", help="run id, prefix or 'latest'")
    parser.add_argument("--env", action="store_true", help="also print the full fingerprint")
    parser.add_argument("--request", action="store_true",
                        help="print only what the run was asked for, as JSON: the request "
                        "`accelbench run --request FILE` runs again (secrets redacted)")
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.store.export import export_json

    with open_store(args, create=False) as store:
        stored = store.load_run(args.run)
        profiles = store.found_for_run(stored.record.id)
    if args.request:
        return _print_request(stored)
    if args.json:
        print_json(export_json([stored]))
        return 0
    from accelbench.report.fingerprint import rows
    from accelbench.report.results import counts
    from accelbench.report.run_view import run_sections
    from accelbench.report.terminal import console, key_value_table, print_sections
    from accelbench.report.text import text

    r = stored.record
    tally = counts(stored.measurements)
    out = console()
    out.print(text(f"Run {r.id}", "bold") + text(f"  {r.generation_key}"))
    out.print(text(f"suite {r.suite or '-'}, device {r.device}, status {r.status}: "
                   f"{tally['ok']} ok, {tally['failed']} failed, {tally['skipped']} skipped"))
    threads = stored.fingerprint.get("threads_source")
    if args.env:
        out.print(key_value_table(rows(stored.fingerprint), title="Stack"))
    elif threads:  # a CPU run: why its cases' `threads` is what it is
        out.print(text(f"CPU threads per process: {threads}"))
    print_sections(run_sections(stored.measurements, profiles), out)
    return 0


def _print_request(stored: StoredRun) -> int:
    from accelbench.core.request import RunRequest
    from accelbench.errors import UserError

    record = stored.record
    if record.request is None:
        raise UserError(f"run {record.id} has no stored request: it was made by "
                        f"`accelbench {record.argv[0] if record.argv else '?'}` before "
                        "requests were stored")
    # Checked as any request handed in: what is printed is what `run --request` reads.
    print_json(RunRequest.from_dict(dict(record.request), f"run {record.id}: its request")
               .to_dict())
    return 0

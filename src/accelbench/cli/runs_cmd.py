"""`accelbench runs`: the runs in the store, newest first."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from accelbench.cli.options import add_json, add_store, open_store, positive_int, print_json

if TYPE_CHECKING:
    from accelbench.store.records import RunRecord

NAME = "runs"
HELP = "list stored runs, newest first"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=positive_int, default=20,
                        help="show at most N runs (default 20)")
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from accelbench.errors import UserError

    if args.limit is not None and args.limit < 1:
        raise UserError("--limit must be at least 1")
    with open_store(args, create=False) as store:
        records = store.list_runs(limit=args.limit)
    if args.json:
        print_json([asdict(r) for r in records])
        return 0
    from accelbench.core.units import format_timestamp
    from accelbench.core.view import Table
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console

    # The host tells apart runs of one stack on several nodes; the case counts share a
    # column, so that the stack, the widest cell, keeps its room.
    rows = [tuple(str(cell) for cell in (
        r.id, format_timestamp(r.started_at), r.host or "-", _made_by(r), r.suite or "-",
        r.device, r.generation_key, f"{r.n_ok}/{r.n_failed}/{r.n_skipped}", r.status))
        for r in records]
    render_rich([Table("Runs", ("Run", "Started (UTC)", "Host", "Command", "Suite", "Device",
                                "Stack", "ok/fail/skip", "Status"), rows,
                       numeric=frozenset({7}))],
                console())
    return 0


def _made_by(record: RunRecord) -> str:
    """The command that made a run, and for a side of an A/B which side of which."""
    from accelbench.analysis.ab import ab_of

    ab = ab_of(record)
    if ab is not None:
        return f"ab: {(ab.side or '?').upper()} of {ab.id}"
    command = (record.request or {}).get("command")
    if not isinstance(command, str):
        command = record.argv[0] if record.argv and isinstance(record.argv[0], str) else "-"
    return command

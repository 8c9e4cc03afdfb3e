"""`accelbench export`: stored runs as JSON (complete, reloadable) or CSV (the figures, for
spreadsheets, with stored text made printable), or each node's newest figures and
verdicts as OpenMetrics or the Prometheus text format (for dashboards)."""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from accelbench.cli.options import add_store, name_arg, open_store, path_arg

NAME = "export"
HELP = "export stored runs (default: all) as JSON or CSV, or the newest figures as OpenMetrics"
# report.openmetrics.FORMATS, named here so that the CLI starts without importing it.
METRIC_FORMATS = ("openmetrics", "prometheus")
FORMATS = ("json", "csv", *METRIC_FORMATS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN", help="run ids, prefixes or 'latest'")
    parser.add_argument("--format", choices=FORMATS, default="json",
                        help="json (default), csv, openmetrics (each node's newest figures "
                        "and verdicts) or prometheus (the same in the text format "
                        "node_exporter's textfile collector reads)")
    parser.add_argument("--node", action="append", type=name_arg, metavar="NAME",
                        help="only the runs of this node (host name); repeat for more")
    parser.add_argument("-o", "--output", type=path_arg, metavar="FILE",
                        help="write here instead of stdout")
    add_store(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.errors import UserError

    with open_store(args, create=False) as store:
        stored = _selected(store, args.runs, args.node or ())
    text = _render(args.format, stored)  # before the file is opened: a refusal writes nothing
    if not args.output:
        _write(args.format, stored, text, sys.stdout)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            _write(args.format, stored, text, out)
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror}") from None
    return 0


def _selected(store: Any, refs: list[str], nodes: tuple[str, ...]) -> list[Any]:
    """The runs `refs` name (default: all, newest first), of `nodes` only when given; a
    node with no run among them is refused."""
    if not nodes:
        return [store.load_run(ref) for ref in refs or [r.id for r in store.list_runs()]]
    from accelbench.errors import NodesError

    records = store.list_runs()
    ids = [store.resolve_run(ref) for ref in refs] if refs else [r.id for r in records]
    host = {r.id: r.host for r in records}
    missing = [n for n in dict.fromkeys(nodes) if n not in {host[i] for i in ids}]
    if missing:
        from accelbench.core.untrusted import short

        among = "the runs named" if refs else f"result store {store.name}"
        raise NodesError(f"no run of node {short(missing[0])} in {among}")
    return [store.load_run(i) for i in ids if host[i] in nodes]


def _render(fmt: str, stored: list[Any]) -> str | None:
    """The text of the metric formats, whole; None for json and csv, written as they go."""
    if fmt not in METRIC_FORMATS:
        return None
    from accelbench.analysis.latest import latest
    from accelbench.report.openmetrics import render

    return render(latest(stored), fmt)


def _write(fmt: str, stored: list[Any], text: str | None, out: IO[str]) -> None:
    if text is not None:
        out.write(text)
    elif fmt == "json":
        from accelbench.core.strict_json import dump
        from accelbench.store.export import export_json

        dump(export_json(stored), out)
    else:
        from accelbench.report.csv_table import write_csv

        write_csv(stored, out)

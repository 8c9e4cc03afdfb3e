"""`accelbench publish`: write a static site of every run in the store, and serve it."""

from __future__ import annotations

import argparse
from pathlib import Path

from accelbench.cli.options import add_store, open_store, path_arg, percentage, whole_number

NAME = "publish"
HELP = ("write a static site of every stored run (overview, cases over time, fleet, "
        "generations, regressions, GPUs, run reports) into a folder, rewriting only what "
        "changed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=path_arg, metavar="DIR",
                        help="the site's folder: new, empty, or published before (default: "
                        "site/ beside the store)")
    parser.add_argument("--threshold", type=percentage, default=5.0, metavar="PCT",
                        help="smallest change the overview and the regressions report "
                        "(default 5)")
    parser.add_argument("--serve", action="store_true",
                        help="then serve the site on 127.0.0.1 until Ctrl-C")
    parser.add_argument("--port", type=whole_number(at_least=0), metavar="N",
                        help="the port of --serve (default 8000; 0: any free port)")
    add_store(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.errors import UserError
    from accelbench.report.site import publish

    if args.port is not None and not args.serve:
        raise UserError("--port is the port of --serve: give --serve too")
    port = 8000 if args.port is None else args.port
    if port > 65535:
        raise UserError(f"--port must be at most 65535, got {port}")
    with open_store(args, create=False) as store:
        folder = Path(args.output) if args.output else store.location.files_dir / "site"
        done = publish(store, folder, threshold=args.threshold / 100)
    print(f"Site {folder}: {done.summary()}", flush=True)
    if args.serve:
        from accelbench.report.site.serve import site_server, url_of

        with site_server(folder, port) as server:
            print(f"Serving {url_of(server)} (Ctrl-C stops)", flush=True)
            server.serve_forever()
    return 0

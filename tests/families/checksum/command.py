"""`accelbench checksum`: the family's own command, born on the run request: its options
make a request, `accelbench.app` runs it, and it prints as every command of checks does."""

from __future__ import annotations

import argparse
import sys

from accelbench.cli.options import add_device, add_json, add_report, add_store, store_location
from accelbench.cli.request_options import add_request_file, given_or_read
from accelbench.core.request import RunRequest

NAME = "checksum"
HELP = "check the host's hash functions on a published vector and time them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algorithm", choices=("sha256", "blake2b", "md5"),
                        help="only this hash (default: the checksum suite's)")
    add_device(parser)
    add_report(parser)
    add_request_file(parser, NAME)
    add_store(parser)
    add_json(parser)


def build_request(args: argparse.Namespace) -> RunRequest:
    values = {"algorithm": (args.algorithm,)} if args.algorithm else {}
    return RunRequest(command=NAME, suite="checksum", benches=(NAME,), values=values,
                      device=args.device, report=args.report, no_report=args.no_report,
                      timing={"max_time": 0.05, "processes": 1, "telemetry_interval": 0.0})


def run(args: argparse.Namespace) -> int:
    from accelbench import app
    from accelbench.cli.printing import print_checks

    finished = app.run(given_or_read(args, build_request, add_arguments),
                       store_location(args), argv=sys.argv[1:])
    if finished is None:
        return 0
    return print_checks(finished, args.json, "Checksum")

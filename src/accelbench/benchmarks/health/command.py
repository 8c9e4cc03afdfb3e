"""`accelbench health`: is this node's hardware healthy and wired as it should be? Run the
health checks (the `health` suite), store each with its findings, print the findings that
warn or fail with the rule that decided each; the exit code is 1 when any check failed."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from accelbench.benchmarks.health.declaration import CHECKS
from accelbench.cli.options import (
    add_device,
    add_json,
    add_report,
    add_store,
    names_arg,
    split_list,
    store_location,
)
from accelbench.cli.progress import add_quiet
from accelbench.cli.request_options import add_request_file
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.core.request import RunRequest, Value

NAME = "health"
HELP = ("check this node's hardware: host memory errors (EDAC), NUMA, PCIe links and errors, "
        "IOMMU, hugepages and GPU/NIC wiring; each GPU's ECC, retired pages, PCIe link, "
        "XGMI/NVLink, throttling and firmware; exit 1 if a check fails")
SUITE = "health"
BENCH = "health"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device(parser)
    parser.add_argument("--check", nargs="+", type=names_arg, metavar="NAME",
                        help="only these checks (default: all): edac numa pcie iommu "
                        "hugepages topology gpu-faults gpu-ecc gpu-pages gpu-pcie gpu-links "
                        "gpu-throttle gpu-versions")
    add_report(parser)
    add_request_file(parser, NAME)
    add_store(parser)
    add_json(parser)
    add_quiet(parser)


def selected(names: Sequence[str]) -> tuple[str, ...]:
    """The checks asked for, each known; an unknown one is refused with the nearest."""
    for name in names:
        if name not in CHECKS:
            close = difflib.get_close_matches(name, CHECKS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UserError(f"unknown health check {name!r}{hint}; checks: {', '.join(CHECKS)}")
    return tuple(dict.fromkeys(names))


def build_request(args: argparse.Namespace) -> RunRequest:
    from accelbench.core.request import RunRequest

    checks = selected(split_list(args.check))
    values: dict[str, tuple[Value, ...]] = {"check": checks} if checks else {}
    return RunRequest(command=NAME, suite=SUITE, benches=(BENCH,), values=values,
                      device=args.device, report=args.report, no_report=args.no_report)


def run(args: argparse.Namespace) -> int:
    from accelbench import app
    from accelbench.benchmarks.health.view import findings_of
    from accelbench.cli.printing import print_checks
    from accelbench.cli.progress import progress_listener
    from accelbench.cli.request_options import given_or_read

    request = given_or_read(args, build_request, add_arguments)
    finished = app.run(request, store_location(args), progress_listener(args),
                       argv=sys.argv[1:])
    if finished is None:
        return 0  # a rank other than 0: rank 0 prints
    findings = {m.case.label: [f.to_dict() for f in findings_of(m)]
                for m in finished.outcome.measurements} if args.json else {}
    return print_checks(finished, args.json, "Health",
                        **({"findings": findings} if args.json else {}))

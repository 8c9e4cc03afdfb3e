"""`accelbench health`: is this node's hardware healthy and wired as it should be? Run the
health checks (the `health` suite), store each with its findings, print the findings that
warn or fail with the rule that decided each; the exit code is 1 when any check failed."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    add_device,
    add_json,
    add_report,
    add_store,
    names_arg,
    split_list,
)
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.runner.plan import Request
    from accelbench.runner.recorder import Outcome

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
    add_store(parser)
    add_json(parser)


def selected(names: Sequence[str]) -> tuple[str, ...]:
    """The checks asked for, each known; an unknown one is refused with the nearest."""
    from accelbench.benchmarks.health.declaration import CHECKS

    for name in names:
        if name not in CHECKS:
            close = difflib.get_close_matches(name, CHECKS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UserError(f"unknown health check {name!r}{hint}; checks: {', '.join(CHECKS)}")
    return tuple(dict.fromkeys(names))


def build_request(args: argparse.Namespace) -> Request:
    from accelbench.runner.plan import Request

    checks = selected(split_list(args.check))
    values = {"check": checks} if checks else {}
    return Request(suite=SUITE, benches=(BENCH,), values=values, device=args.device)


def run(args: argparse.Namespace) -> int:
    from accelbench.benchmarks import REGISTRY
    from accelbench.cli.run_cmd import run_request
    from accelbench.runner.plan import validate

    valid = validate(build_request(args), REGISTRY)
    return run_request(args, valid, _finish)


def _finish(args: argparse.Namespace, outcome: Outcome, store_location: str,
            report: Path | None) -> int:
    from accelbench.benchmarks.health.view import findings_of
    from accelbench.cli.validate_cmd import print_checks

    findings = {m.case.label: [f.to_dict() for f in findings_of(m)]
                for m in outcome.measurements} if args.json else {}
    return print_checks(args, outcome, store_location, report, "Health",
                        **({"findings": findings} if args.json else {}))

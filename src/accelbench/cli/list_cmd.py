"""`accelbench list`: the registered benchmarks, their parameters, and the suites."""

from __future__ import annotations

import argparse

from accelbench.cli.options import add_json, name_arg, print_json
from accelbench.core.params import Param

NAME = "list"
HELP = "list benchmarks with their parameters, devices and dtypes, and the suites"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", type=name_arg, help="only benchmarks of this family")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.benchmarks import REGISTRY
    from accelbench.errors import UserError
    from accelbench.runner.plan import load_suite, suite_names

    families = REGISTRY.families
    if args.family and args.family not in families:
        raise UserError(f"unknown family {args.family!r} (families: {', '.join(families)})")
    benches = [b for b in REGISTRY if not args.family or b.family == args.family]
    suites = [load_suite(name, REGISTRY) for name in suite_names(REGISTRY)]
    if args.json:
        print_json({
            "benchmarks": [b.describe() for b in benches],
            "suites": [{"name": s.name, "description": s.description,
                        "benchmarks": s.benchmarks()} for s in suites],
        })
        return 0

    from accelbench.core.view import Table
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console
    from accelbench.report.text import text

    rows = [(b.name, b.family, ", ".join(b.devices),
             "\n".join(_describe_param(p) for p in b.params) or "-", b.version, b.summary)
            for b in benches]
    out = console()
    render_rich([Table("Benchmarks", ("Name", "Family", "Devices", "Parameters (default)",
                                      "Version", "Summary"), rows, ruled=True)], out)
    line = text("Suites: ")
    for i, s in enumerate(suites):
        line += text("; " if i else "") + text(s.name, "bold") + text(f": {s.description}")
    out.print(line)
    return 0


def _describe_param(p: Param) -> str:
    from accelbench.core.units import format_plain

    text = f"{p.name}={format_plain(p.default)}"
    if p.choices:
        text += f"  [{' | '.join(format_plain(c) for c in p.choices)}]"
    if p.conditions:
        text += f"  ({p.condition_text()} only)"
    return text

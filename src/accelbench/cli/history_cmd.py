"""`accelbench history CASE`: a case over the stored runs of each stack, and its steps."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    add_exclude_contended,
    add_exclude_throttled,
    add_json,
    add_store,
    name_arg,
    open_store,
    percentage,
    print_json,
    whole_number,
)

if TYPE_CHECKING:
    from accelbench.analysis.history import Series

NAME = "history"
HELP = "the series of a case over stored runs of the same stack, and where it changed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("case", type=name_arg, metavar="CASE",
                        help="a case key, or a pattern 'BENCH [NAME=GLOB ...]' such as "
                        "'gemm dtype=bf16 shape=4096'")
    parser.add_argument("--stack", type=name_arg, metavar="GLOB",
                        help="only runs of matching generation keys")
    parser.add_argument("--host", type=name_arg, metavar="GLOB", help="only runs of matching hosts")
    parser.add_argument("--limit", type=whole_number(at_least=2), default=200, metavar="N",
                        help="the newest N runs of each series (default 200)")
    parser.add_argument("--min-effect", type=percentage, default=5.0, metavar="PCT",
                        help="smallest step reported (default 5)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit with 1 when a series ends on a regression, else with 9 "
                        "when a series cannot tell (busy host, throttled device, too noisy "
                        "or too few runs)")
    add_exclude_contended(parser)
    add_exclude_throttled(parser)
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.analysis.history import CANNOT_TELL, CHANGED, NO_CHANGE, case_matcher, history
    from accelbench.analysis.select import (
        exclude_contended,
        exclude_throttled,
        select_case_runs,
    )
    from accelbench.cli.options import check_percent
    from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE, UserError

    if args.limit < 2:
        raise UserError("--limit must be at least 2")
    check_percent(args.min_effect, "--min-effect")
    wanted = case_matcher(args.case)
    with open_store(args, create=False) as store:
        runs = select_case_runs(store, wanted)
    if args.exclude_contended:
        runs = exclude_contended(runs)
    if args.exclude_throttled:
        runs = exclude_throttled(runs)
    series = history(runs, wanted, stacks=args.stack, hosts=args.host, limit=args.limit,
                     min_effect=args.min_effect / 100)
    down = [s for s in series if s.latest_regression is not None]
    unsure = [s for s in series if s.verdict == CANNOT_TELL]
    if args.json:
        print_json({"series": [s.to_dict() for s in series],
                    "ends_on_regression": [f"{s.case.label} on {s.generation_key}"
                                           for s in down],
                    "cannot_tell": [f"{s.case.label} on {s.generation_key}" for s in unsure],
                    "summary": {"series": len(series),
                                "changed": sum(s.verdict == CHANGED for s in series),
                                "no_change": sum(s.verdict == NO_CHANGE for s in series),
                                "cannot_tell": len(unsure),
                                "ends_on_regression": len(down)}})
    else:
        from accelbench.report.analysis_tables import history_summary, history_tables
        from accelbench.report.tables import render_rich
        from accelbench.report.terminal import console

        out = console()
        render_rich(history_tables(series), out)
        out.print(history_summary(series), markup=False)
        for line in _explain_hints(down):
            out.print(line, markup=False, soft_wrap=True)
    if not args.fail_on_regression:
        return 0
    # A gate passes only on evidence: a series that cannot tell leaves it undecided.
    return EXIT_CASE_FAILED if down else EXIT_INCONCLUSIVE if unsure else 0


def _explain_hints(down: Sequence[Series]) -> list[str]:
    """How to find out why each series that ends on a regression stepped, where `explain`
    can: both runs either side of the step made on this host."""
    from accelbench.env.fingerprint import host_name
    from accelbench.report.explain_tables import explain_hint

    here = host_name()
    out = []
    for s in down:
        step = s.latest_regression
        if step is None or step.index < 1:
            continue
        before, at = s.points[step.index - 1], s.points[step.index]
        if before.host == at.host == here:
            out.append(explain_hint(before.run_id, at.run_id, s.case.label))
    return out

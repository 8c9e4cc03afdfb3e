"""`accelbench compare A B`: every case both sides measured, B over A, with a verdict."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    add_exclude_contended,
    add_exclude_throttled,
    add_json,
    add_judge_anyway,
    add_store,
    check_percent,
    name_arg,
    open_store,
    percentage,
    positive_percentage,
    print_json,
    probability,
)

if TYPE_CHECKING:
    from accelbench.analysis.compare import Comparison
    from accelbench.store import StoredRun

NAME = "compare"
HELP = "compare two runs (or two sets of runs, e.g. two stacks) case by case"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="baseline: run id, prefix, 'latest', a stack "
                        "glob such as '*MI250X*', or FIELD=GLOB (gen, host, device, suite)")
    parser.add_argument("b", metavar="B", help="the runs compared with A, given the same way")
    parser.add_argument("--min-effect", type=percentage, default=5.0, metavar="PCT",
                        help="smallest change reported as faster or slower (default 5)")
    parser.add_argument("--alpha", type=probability, default=0.05,
                        help="significance level of the test (default 0.05: 95%% CIs)")
    parser.add_argument("--fail-on-regression", type=positive_percentage, metavar="PCT",
                        help="exit with 1 when a case is conclusively slower by PCT%% or "
                        "more; with 9 when none is but an inconclusive case may be")
    parser.add_argument("--case", type=name_arg, metavar="PATTERN",
                        help="only cases matching 'BENCH [NAME=GLOB ...]', e.g. 'gemm dtype=bf16'")
    parser.add_argument("--figure", type=name_arg, metavar="NAME",
                        help="compare this figure (a name or glob, e.g. 'throughput_per_joule' "
                        "or '*_per_joule') instead of each case's headline one; cases "
                        "without it are listed as not compared")
    add_exclude_contended(parser)
    add_exclude_throttled(parser)
    add_judge_anyway(parser)
    add_store(parser)
    add_json(parser)


def check_figure_found(pattern: str, *sides: Sequence[StoredRun]) -> None:
    """Refuse a --figure that no measured case of either side has: a typo would otherwise
    list every case as not compared."""
    from accelbench.analysis.values import matching_figure
    from accelbench.errors import UserError

    names: dict[str, None] = {}
    for m in (m for runs in sides for run in runs for m in run.measurements if m.ok):
        if matching_figure(m, pattern) is not None:
            return
        names.update(dict.fromkeys(f.name for f in m.figures))
    raise UserError(f"no measured case has a figure matching --figure {pattern!r} "
                    f"(figures: {', '.join(names) or 'none'})")


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from accelbench.analysis import floors
    from accelbench.analysis.compare import compare
    from accelbench.analysis.select import (
        exclude_contended,
        exclude_throttled,
        parse_case_pattern,
        select_group,
    )
    from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE, UserError

    check_percent(args.min_effect, "--min-effect")
    check_percent(args.fail_on_regression, "--fail-on-regression", allow_zero=False)
    if not 0 < args.alpha < 1:
        raise UserError("--alpha must be between 0 and 1")
    pattern = parse_case_pattern(args.case) if args.case else None
    with open_store(args, create=False) as store:
        a = select_group(store, args.a)
        b = select_group(store, args.b)
        keys = {m.case.key for run in (*a.runs, *b.runs) for m in run.measurements}
        learned = floors.learn(store.measurements_for_cases(sorted(keys)), args.figure)
    if args.exclude_contended:
        a = dataclasses.replace(a, runs=tuple(exclude_contended(a.runs)))
        b = dataclasses.replace(b, runs=tuple(exclude_contended(b.runs)))
    if args.exclude_throttled:
        a = dataclasses.replace(a, runs=tuple(exclude_throttled(a.runs)))
        b = dataclasses.replace(b, runs=tuple(exclude_throttled(b.runs)))
    if args.figure is not None:
        check_figure_found(args.figure, a.runs, b.runs)
    result = compare(a, b, min_effect=args.min_effect / 100, alpha=args.alpha, cases=pattern,
                     figure=args.figure, floors=learned, judge_anyway=args.judge_contended)
    gate = args.fail_on_regression
    regressions = result.regressions(gate / 100) if gate is not None else []
    undecided = result.undecided(gate / 100) if gate is not None else []
    # A gate passes only on evidence: a case it could not judge, or none compared at all,
    # leaves it undecided.
    unjudged = result.unjudged() if gate is not None else []
    nothing = result.nothing_compared() if gate is not None else None
    if args.json:
        data = result.to_dict()
        if gate is not None:
            data["fail_on_regression_pct"] = gate
            data["regressions"] = [c.label for c in regressions]
            data["undecided"] = [{"label": c.label, "reason": c.reason,
                                  "runs_needed": c.runs_needed} for c in undecided]
            data["unjudged"] = [u.to_dict() for u in unjudged]
            data["no_evidence"] = nothing
        print_json(data)
    else:
        from accelbench.report.analysis_tables import comparison_tables, gate_lines
        from accelbench.report.tables import render_rich
        from accelbench.report.terminal import console

        out = console()
        render_rich(comparison_tables(result), out)
        if gate is not None:
            for line in gate_lines(gate, regressions, undecided, unjudged, nothing):
                out.print(line, markup=False)
        hint = _explain_hint(result)
        if hint is not None:
            out.print(hint, markup=False, soft_wrap=True)
    if regressions:
        return EXIT_CASE_FAILED
    return EXIT_INCONCLUSIVE if undecided or unjudged or nothing else 0


def _explain_hint(result: Comparison) -> str | None:
    """How to find out why the case that slowed most moved, where `explain` can: one run
    a side, both made on this host (it profiles the case again here)."""
    from accelbench.analysis.compare import SLOWER
    from accelbench.env.fingerprint import host_name
    from accelbench.report.explain_tables import explain_hint

    slower = [c for c in result.cases if c.verdict == SLOWER]
    if not slower or len(result.a.runs) != 1 or len(result.b.runs) != 1:
        return None
    a, b = result.a.runs[0].record, result.b.runs[0].record
    if not a.host == b.host == host_name():
        return None
    worst = min(slower, key=lambda c: c.speed.ratio)
    return explain_hint(a.id, b.id, worst.label)

"""`accelbench diagnose`: which nodes fail which rule against a baseline, and by how much."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from accelbench.cli.options import (
    add_exclude_contended,
    add_exclude_throttled,
    add_json,
    add_store,
    name_arg,
    open_store,
    path_arg,
    print_json,
)

NAME = "diagnose"
HELP = ("check every node's newest measurement of each case against a baseline with rules; "
        "exit 1 if any fails, 9 if none fails but a verdict is inconclusive")
DESCRIPTION = (
    f"{HELP}. A node is judged on its newest measurement of each case, whichever of its "
    "runs that came from (a validate run after a quick run leaves the quick run's figures "
    "judged), and each finding names its run. A rule of a --rules file that matches no "
    "measurement in the selected runs (a typo in a metric name would silently disable it) "
    "is an error (exit 2) unless --allow-unmatched is given; the default rules cover every "
    "benchmark family, so those of them that match nothing (a CPU node runs no "
    "collectives) are only noted. A figure measured on a busy host or a throttled device "
    "never fails a node: where it would, the node's verdict on that rule is inconclusive, "
    "with the reason, and the fleet median is taken from the other nodes' figures. A "
    "case a node was never asked to run (only other nodes' runs asked for it) is not "
    "missing on it."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="runs or filters forming the fleet (default: every stored run; "
                        "each host and device is judged on its newest measurement of each "
                        "case among them)")
    parser.add_argument("--rules", type=path_arg, metavar="FILE",
                        help="YAML rules file (default: the rules shipped with accelbench)")
    parser.add_argument("--allow-unmatched", action="store_true",
                        help="go on when a rule of the --rules file matches no measurement "
                        "in the selected runs: warn on stderr and list it in the result "
                        "(default: an error, exit 2)")
    parser.add_argument("--baseline", type=name_arg, default="fleet", metavar="REF",
                        help="'fleet' (default: the fleet median of each stack), a baseline "
                        "file written by `accelbench baseline`, or a run (several runs: their "
                        "median)")
    parser.add_argument("--drain-list", type=path_arg, metavar="FILE",
                        help="write the host name of every failing node to FILE, one per "
                        "line with its Slurm drain reason naming its reason codes "
                        "(`host Reason=accelbench:ACCEL_...`; an empty file when none "
                        "fails; an inconclusive node is never listed)")
    parser.add_argument("--code", nargs="+", metavar="CODE",
                        help="judge only the findings with one of these reason codes "
                        "(docs/reasons.md): other findings are left out, a node with none "
                        "left passes")
    add_exclude_contended(parser)
    add_exclude_throttled(parser)
    parser.add_argument("--by-gpu", action="store_true",
                        help="instead of judging nodes, follow each GPU by its serial (else "
                        "UUID) across the nodes it was in: its figures over its runs and "
                        "where they changed (change points); exit 1 if a GPU's figure of a "
                        "case ends on a regression")
    parser.add_argument("--gpu", metavar="KEY",
                        help="only this GPU (its serial, UUID or key); implies --by-gpu")
    add_store(parser)
    add_json(parser)


def load_baseline(ref: str, store: Any, leave_out: tuple[str, ...] = ()) -> Any:
    """None for the fleet median; else a baseline file, one run, or the median of runs
    (their figures `unfit` by a mark of `leave_out` left out)."""
    from accelbench.analysis import baseline
    from accelbench.analysis.select import select_group

    if ref == "fleet":
        return None
    if Path(ref).is_file():
        return baseline.read_baseline(ref)
    group = select_group(store, ref)
    if len(group.runs) == 1:
        return baseline.from_run(group.runs[0], leave_out=leave_out)
    return baseline.fleet_median(group.runs, f"median of the {len(group.runs)} runs of {ref}",
                                 leave_out=leave_out)


def run(args: argparse.Namespace) -> int:
    if args.by_gpu or args.gpu is not None:
        return run_by_gpu(args)
    import sys

    from accelbench.analysis.diagnose import diagnose, unmatched_message
    from accelbench.analysis.evidence import CONTENDED, THROTTLED
    from accelbench.analysis.rules import load_rules
    from accelbench.analysis.select import select_runs
    from accelbench.core.reasons import known_codes
    from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE

    codes = known_codes(args.code) if args.code else ()
    rules = load_rules(args.rules)
    leave_out = tuple(mark for mark, asked in ((CONTENDED, args.exclude_contended),
                                               (THROTTLED, args.exclude_throttled)) if asked)
    with open_store(args, create=False) as store:
        base = load_baseline(args.baseline, store, leave_out)
        runs = select_runs(store, args.runs)
    strict = args.rules is not None
    result = diagnose(runs, rules, base, strict=strict, allow_unmatched=args.allow_unmatched,
                      exclude_contended=args.exclude_contended,
                      exclude_throttled=args.exclude_throttled)
    if strict and result.unmatched:
        print(f"accelbench: warning: {unmatched_message(result.unmatched)}", file=sys.stderr)
    if codes:
        from accelbench.analysis.diagnose import with_codes

        result = with_codes(result, codes)
    from accelbench.slurm.drain import write_drain

    by_host: dict[str, list[str]] = {}
    for n in result.failing:
        by_host.setdefault(n.host, []).extend(n.codes)
    drain = write_drain(args.drain_list, [n.host for n in result.failing], by_host) \
        if args.drain_list else None
    if args.json:
        print_json({**result.to_dict(), **({"drain": drain} if drain is not None else {})})
    else:
        from accelbench.report.analysis_tables import diagnosis_tables
        from accelbench.report.tables import render_rich
        from accelbench.report.terminal import console

        render_rich(diagnosis_tables(result), console())
    if result.failing:
        return EXIT_CASE_FAILED
    return EXIT_INCONCLUSIVE if result.inconclusive else 0


def run_by_gpu(args: argparse.Namespace) -> int:
    """`diagnose --by-gpu`: each GPU's change points, whichever node it was in."""
    from accelbench.analysis.gpu_history import load_histories
    from accelbench.analysis.select import select_runs
    from accelbench.errors import EXIT_CASE_FAILED, UserError

    judging = [name for name, given in (
        ("--rules", args.rules is not None), ("--baseline", args.baseline != "fleet"),
        ("--drain-list", args.drain_list is not None),
        ("--code", bool(getattr(args, "code", None)))) if given]
    if judging:
        raise UserError(f"--by-gpu follows GPUs over time and judges no node: it takes no "
                        f"{', '.join(judging)}")

    with open_store(args, create=False) as store:
        run_ids = ({r.record.id for r in select_runs(store, args.runs)} if args.runs
                   else None)
        histories = load_histories(store, gpu=args.gpu, run_ids=run_ids)
    if args.json:
        print_json({"gpus": [h.to_dict() for h in histories]})
    else:
        from accelbench.report.gpu_tables import gpu_history_tables
        from accelbench.report.tables import render_rich
        from accelbench.report.terminal import console

        render_rich(gpu_history_tables(histories), console())
    return EXIT_CASE_FAILED if any(h.regressed for h in histories) else 0

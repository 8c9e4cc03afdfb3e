"""`accelbench tune`: the GEMM shapes of a selection tuned offline with PyTorch's TunableOp,
the table kept beside the store, then the stack A/B'd without and with it (runner.tune).

A thin adapter: `run`'s options make the selection, `--python` the stack, the A/B's
settings are `ab`'s; `app.tune` does the work and `ab`'s printer prints the A/B."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accelbench.cli.options import (
    add_json,
    add_store,
    percentage,
    positive_percentage,
    positive_seconds,
    print_json,
    probability,
    store_location,
    whole_number,
)
from accelbench.cli.request_options import add_request_options, request_of
from accelbench.core.sequential import HORIZON, MAX_HORIZON

if TYPE_CHECKING:
    from accelbench.app import Tuned
    from accelbench.core.measurement import Measurement
    from accelbench.core.request import AbRequest
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.plan import PlannedCase

NAME = "tune"
HELP = ("Tune the GEMM shapes of a suite, benchmark or model with PyTorch's TunableOp "
        "(ROCm and CUDA GPUs), keep the table beside the store, and A/B the stack without "
        "and with it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", metavar="ENV",
                        help="the stack to tune: a virtual environment's folder or a Python "
                        "interpreter with PyTorch (default: this one)")
    parser.add_argument("--tune-timeout", type=positive_seconds, metavar="S",
                        help="seconds the offline tuning may take before it is stopped and "
                        "fails (default 3600)")
    parser.add_argument("--no-ab", action="store_true",
                        help="keep the table, but do not A/B the stack without and with it")
    parser.add_argument("--min-effect", type=percentage, default=5.0, metavar="PCT",
                        help="A/B: smallest change called faster or slower (default 5)")
    parser.add_argument("--alpha", type=probability, default=0.05,
                        help="A/B: chance of any false faster/slower call (default 0.05)")
    parser.add_argument("--max-rounds", type=whole_number(at_least=2, at_most=MAX_HORIZON),
                        default=HORIZON, metavar="N",
                        help="A/B: pairs of processes per case at most (default "
                        f"%(default)s, at most {MAX_HORIZON})")
    parser.add_argument("--budget", type=positive_seconds, metavar="S",
                        help="A/B: seconds for all the rounds (default: no limit but "
                        "--max-rounds)")
    parser.add_argument("--fail-on-regression", type=positive_percentage, metavar="PCT",
                        help="A/B: exit with 1 when a case is decided slower with the table "
                        "by PCT%% or more; with 9 when none is but an undecided case may be")
    add_request_options(parser)
    add_store(parser)
    add_json(parser)


def ab_settings(args: argparse.Namespace) -> AbRequest | None:
    """The A/B's settings (its two stacks are tune's to make); None with --no-ab."""
    from accelbench.core.request import AbRequest
    from accelbench.errors import UserError

    ab_options = ("budget", "fail_on_regression", "report")
    if args.no_ab:
        given = [f"--{name.replace('_', '-')}" for name in ab_options
                 if getattr(args, name) is not None]
        if given:
            raise UserError(f"--no-ab runs no A/B: leave out {', '.join(given)}")
        return None
    return AbRequest(min_effect=args.min_effect / 100, alpha=args.alpha,
                     max_rounds=args.max_rounds, budget=args.budget,
                     fail_on_regression=(args.fail_on_regression / 100
                                         if args.fail_on_regression is not None else None))


def run(args: argparse.Namespace) -> int:
    from accelbench.app import tune
    from accelbench.cli.ab_printing import AbProgress
    from accelbench.runner.stack import python_of

    request = request_of(args)
    settings = ab_settings(args)
    python = python_of(args.python, "--python") if args.python is not None else None
    tuned = tune(request, store_location(args), python=python, ab_settings=settings,
                 tune_timeout=args.tune_timeout, listener=_Collecting(),
                 ab_listener=AbProgress(), argv=sys.argv[1:])
    return print_tuned(tuned, args.json)


def tuned_json(tuned: Tuned) -> dict[str, Any]:
    from accelbench.cli.ab_printing import ab_json

    table = tuned.table
    data: dict[str, Any] = {
        "table": str(table.path), "sidecar": str(table.sidecar), "sha256": table.sha256,
        "entries": table.entries, "gemms_collected": tuned.gemms,
        "gemms_tuned": table.meta.get("gemms_tuned"),
        "validators": dict(table.validators),
        "filename": table.pattern,
        "collection_runs": [tuned.collected.run_id],
        "ab": ab_json(tuned.ab) if tuned.ab is not None else None,
        "exit_code": exit_code(tuned),
    }
    return data


def exit_code(tuned: Tuned) -> int:
    """The A/B's; with no A/B, the collecting run's (1 when a case failed in it)."""
    if tuned.ab is not None:
        return tuned.ab.exit_code(tuned.ab.result.ab.fail_on_regression)
    return tuned.collected.exit_code


def print_tuned(tuned: Tuned, as_json: bool) -> int:
    from accelbench.cli.ab_printing import print_ab

    if as_json:
        print_json(tuned_json(tuned))
        return exit_code(tuned)
    for line in summary(tuned):
        print(line)
    if tuned.ab is not None:
        return print_ab(tuned.ab, False)
    return exit_code(tuned)


def summary(tuned: Tuned) -> Sequence[str]:
    table = tuned.table
    failed = len(tuned.collected.failed)
    lines = [
        f"Collected {tuned.gemms} GEMM shape(s) in run {tuned.collected.run_id} "
        f"(stored as an ordinary run{f'; {failed} case(s) failed' if failed else ''})",
        f"Tuned {table.meta.get('gemms_tuned', '?')} of them: {table.entries} entr"
        f"{'y' if table.entries == 1 else 'ies'} in {table.path}",
        f"sha256 {table.sha256}; validators: "
        + ", ".join(f"{k}={v}" for k, v in sorted(table.validators.items())),
        f"Use it: PYTORCH_TUNABLEOP_ENABLED=1 PYTORCH_TUNABLEOP_TUNING=0 "
        f"PYTORCH_TUNABLEOP_FILENAME={table.pattern}",
    ]
    return lines


class _Collecting:
    """One line on stderr as the collecting run begins, and one per case."""

    def planned(self, cases: Sequence[PlannedCase], fingerprint: Fingerprint,
                run_id: str) -> None:
        print(f"accelbench: tune: collecting GEMM shapes: run {run_id}, {len(cases)} "
              f"case(s) on {fingerprint.device.name}, stored as an ordinary run",
              file=sys.stderr, flush=True)

    def started(self, index: int, planned: PlannedCase) -> None:
        pass

    def process_started(self, index: int, planned: PlannedCase, process: int,
                        processes: int, budget_s: float) -> None:
        pass

    def process_done(self, index: int, process: int, processes: int,
                     measurement: Measurement) -> None:
        pass

    def finished(self, index: int, measurement: Measurement) -> None:
        print(f"accelbench: tune: {measurement.case.label}: {measurement.status}",
              file=sys.stderr, flush=True)

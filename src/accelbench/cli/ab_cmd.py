"""`accelbench ab`: the same cases under two stacks on this machine, paired process by
process and run until each case is decided (runner.ab, core.sequential).

A thin adapter: `run`'s options make the selection, `--a`/`--b` and `--a-env`/`--b-env`
the two stacks, and the A/B's settings join them in one `RunRequest` (its `ab`), which
`app.ab` runs; `--request FILE` reads one instead (`accelbench show RUN --request` prints
a side's)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

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
from accelbench.cli.request_options import (
    add_request_file,
    add_request_options,
    given_or_read,
    request_of,
)
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.app import AbFinished
    from accelbench.core.request import RunRequest, Stack

NAME = "ab"
HELP = ("A/B two stacks on this machine (two PyTorch installs, a setting on and off): "
        "paired processes, run until each case is decided")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for side in ("a", "b"):
        parser.add_argument(f"--{side}", metavar="ENV",
                            help=f"stack {side.upper()}: a virtual environment's folder or "
                            "a Python interpreter, with PyTorch and accelbench's "
                            "dependencies (default: this one)")
        parser.add_argument(f"--{side}-env", action="append", metavar="NAME=VALUE",
                            help=f"an environment variable set for stack {side.upper()}'s "
                            "processes (repeatable), e.g. PYTORCH_TUNABLEOP_ENABLED=1")
    parser.add_argument("--min-effect", type=percentage, default=5.0, metavar="PCT",
                        help="smallest change called faster or slower; a case within ±PCT%% "
                        "is 'same' (default 5)")
    parser.add_argument("--alpha", type=probability, default=0.05,
                        help="chance of any false faster/slower call over all the cases "
                        "(default 0.05)")
    parser.add_argument("--max-rounds", type=whole_number(at_least=2), default=20,
                        metavar="N", help="pairs of processes per case at most (default 20)")
    parser.add_argument("--budget", type=positive_seconds, metavar="S",
                        help="seconds for all the rounds; the cases still undecided then are "
                        "inconclusive (default: no limit but --max-rounds)")
    parser.add_argument("--fail-on-regression", type=positive_percentage, metavar="PCT",
                        help="exit with 1 when a case is decided slower by PCT%% or more; "
                        "with 9 when none is but an undecided case may be")
    add_request_options(parser)
    add_request_file(parser, NAME)
    add_store(parser)
    add_json(parser)


def request_of_ab(args: argparse.Namespace) -> RunRequest:
    """The request of `ab`'s options: `run`'s selection with the A/B's settings."""
    from accelbench.core.request import AB, AbRequest

    if args.repeat is not None:
        raise UserError("an A/B runs its own rounds: leave out --repeat (see --max-rounds)")
    ab = AbRequest(a=_stack(args.a, args.a_env, "a"), b=_stack(args.b, args.b_env, "b"),
                   min_effect=args.min_effect / 100, alpha=args.alpha,
                   max_rounds=args.max_rounds, budget=args.budget,
                   fail_on_regression=(args.fail_on_regression / 100
                                       if args.fail_on_regression is not None else None))
    return request_of(args).replace(command=AB, ab=ab)


def _stack(given: str | None, env: Sequence[str] | None, side: str) -> Stack:
    from accelbench.core.request import Stack
    from accelbench.runner.stack import python_of

    python = python_of(given, f"--{side}") if given is not None else None
    values: dict[str, str] = {}
    for item in env or ():
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier() or not name.isascii():
            raise UserError(f"--{side}-env {item!r}: expected NAME=VALUE")
        values[name] = value
    return Stack(python, tuple(values.items()))


def run(args: argparse.Namespace) -> int:
    from accelbench.app import ab

    request = given_or_read(args, request_of_ab, add_arguments)
    if request.ab is None:
        raise UserError(f"--request {args.request}: not an A/B request (it has no `ab`): "
                        "run it with `accelbench run --request FILE`")
    if request.ab.a == request.ab.b:
        print("accelbench: note: A and B are the same stack: an A/A, which tells how often "
              "this machine calls a difference where there is none", file=sys.stderr)
    finished = ab(request, store_location(args), _Progress(), argv=sys.argv[1:])
    return print_ab(finished, args.json)


def print_ab(finished: AbFinished, as_json: bool) -> int:
    """An A/B as `ab` prints it: its table and gate, where it is stored and reported;
    with --json all of it and each side's run id. Returns its exit code."""
    from accelbench.report.ab_tables import ab_tables, gate_lines

    result, outcome = finished.result, finished.outcome
    gate = result.ab.fail_on_regression
    code = finished.exit_code(gate)
    if as_json:
        data = {**result.to_dict(), "store": finished.store,
                "report": str(finished.report) if finished.report else None,
                "rounds_run": outcome.rounds, "elapsed_s": round(outcome.elapsed, 3),
                "stopped": outcome.stopped, "exit_code": code}
        if gate is not None:
            from accelbench.analysis.ab import gate as judge_gate

            regressed, undecided = judge_gate(result.cases, gate)
            data["fail_on_regression_pct"] = 100 * gate
            data["regressions"] = [c.label for c in regressed]
            data["undecided"] = [c.label for c in undecided]
        print_json(data)
        return code
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console
    from accelbench.report.text import text

    out = console()
    render_rich(ab_tables(result), out)
    if gate is not None:
        for line in gate_lines(gate, result):
            out.print(text(line))
    out.print(text(f"{outcome.rounds} round(s) in {outcome.elapsed:.0f} s; stopped: "
                   f"{outcome.stopped}"))
    out.print(text(f"Stored in {finished.store} as runs {result.a.record.id} (A) and "
                   f"{result.b.record.id} (B)"))
    if finished.report:
        out.print(text(f"Report: {finished.report}"))
    return code


class _Progress:
    """A line on stderr per round: how many cases have stopped, and the most time left."""

    def planned(self, cases: int, run_a: str, run_b: str) -> None:
        print(f"accelbench: A/B of {cases} case(s): runs {run_a} (A) and {run_b} (B)",
              file=sys.stderr, flush=True)

    def round_done(self, number: int, decided: int, cases: int, elapsed: float,
                   left: float) -> None:
        print(f"accelbench: round {number}: {decided} of {cases} case(s) stopped "
              f"({elapsed:.0f} s; at most ~{left:.0f} s left)", file=sys.stderr, flush=True)

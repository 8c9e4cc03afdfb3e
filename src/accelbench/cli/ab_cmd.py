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

from accelbench.cli.ab_printing import AbProgress, print_ab
from accelbench.cli.options import (
    add_json,
    add_store,
    env_pairs,
    percentage,
    positive_percentage,
    positive_seconds,
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
from accelbench.core.sequential import HORIZON, MAX_HORIZON
from accelbench.errors import UserError

if TYPE_CHECKING:
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
    parser.add_argument("--max-rounds", type=whole_number(at_least=2, at_most=MAX_HORIZON),
                        default=HORIZON, metavar="N",
                        help="pairs of processes per case at most (default %(default)s, at "
                        f"most {MAX_HORIZON})")
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
    return Stack(python, env_pairs(env, f"--{side}-env"))


def run(args: argparse.Namespace) -> int:
    from accelbench.app import ab

    request = given_or_read(args, request_of_ab, add_arguments)
    if request.ab is None:
        raise UserError(f"--request {args.request}: not an A/B request (it has no `ab`): "
                        "run it with `accelbench run --request FILE`")
    if request.ab.a == request.ab.b:
        print("accelbench: note: A and B are the same stack: an A/A, which tells how often "
              "this machine calls a difference where there is none", file=sys.stderr)
    finished = ab(request, store_location(args), AbProgress(), argv=sys.argv[1:])
    return print_ab(finished, args.json)

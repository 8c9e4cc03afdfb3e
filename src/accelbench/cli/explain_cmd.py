"""`accelbench explain`: why a case of two stored runs (or of an A/B) differs, from fresh
profiles of the case under each run's stack (app.explain, profile.explain_session)."""

from __future__ import annotations

import argparse
import sys
import time

from accelbench.cli.options import (
    add_json,
    add_store,
    env_pairs,
    non_negative_int,
    positive_int,
    positive_seconds,
    print_json,
    store_location,
    whole_number,
)

NAME = "explain"
HELP = ("why a case got slower (or faster) between two runs: profile it under both stacks "
        "and name the operators, shapes, kernels, versions and tuning that changed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A",
                        help="the run before (an id, a prefix or 'latest'); a side of an A/B "
                        "alone names the A/B")
    parser.add_argument("run_b", metavar="RUN_B", nargs="?",
                        help="the run after (default: the other side of RUN_A's A/B)")
    parser.add_argument("--case", metavar="CASE",
                        help="the case: its key, its label or part of it (default: the case "
                        "B measured worst against A)")
    for side in ("a", "b"):
        parser.add_argument(f"--{side}", metavar="ENV",
                            help=f"the interpreter or virtual environment that made run "
                            f"{side.upper()} (default: its A/B's, else this one); its PyTorch "
                            "must be the run's")
        parser.add_argument(f"--{side}-env", action="append", metavar="NAME=VALUE",
                            help=f"an environment variable set for side {side.upper()}'s "
                            "profiles, over the run's own (repeatable)")
    parser.add_argument("--rounds", type=whole_number(at_least=1), default=3, metavar="N",
                        help="profiles of each side, in balanced order A B, B A, ... "
                        "(default 3: a change beyond every profile of the other side "
                        "happens by chance 1 time in 10 where nothing changed)")
    parser.add_argument("--steps", type=positive_int, default=5, metavar="N",
                        help="profiled steps per profile (default 5)")
    parser.add_argument("--warmup", type=non_negative_int, default=2, metavar="N",
                        help="steps profiled but discarded first (default 2)")
    parser.add_argument("--timeout", type=positive_seconds, default=900.0, metavar="S",
                        help="seconds a profile may take before its side fails (default 900)")
    parser.add_argument("--top", type=positive_int, default=8, metavar="N",
                        help="rows of each table (default 8)")
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.app import explain
    from accelbench.profile.explain_session import ExplainRequest

    python: dict[str, str | None] = {}
    env: dict[str, tuple[tuple[str, str], ...]] = {}
    for side in ("a", "b"):
        python[side] = _python(getattr(args, side), f"--{side}")
        env[side] = env_pairs(getattr(args, f"{side}_env"), f"--{side}-env")
    request = ExplainRequest(args.run_a, args.run_b, args.case, python, env, args.rounds,
                             args.steps, args.warmup, timeout_s=args.timeout)
    explained = explain(request, store_location(args), _Progress())
    if args.json:
        print_json({"id": explained.id, **explained.findings})
        return 0
    from accelbench.report.explain_tables import explain_tables
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console
    from accelbench.report.text import text

    out = console()
    render_rich(explain_tables(explained.findings, args.top), out)
    out.print(text(f"Stored as explanation {explained.id}; the profiles' runs, request files "
                   f"and findings are in {explained.folder}"), soft_wrap=True)
    return 0


def _python(given: str | None, option: str) -> str | None:
    if given is None:
        return None
    from accelbench.runner.stack import python_of

    return python_of(given, option)


class _Progress:
    """A line on stderr for the case chosen and for each profile started, with the time
    left at the pace of the profiles so far."""

    def __init__(self) -> None:
        self._started: float | None = None
        self._done = 0

    def chose(self, label: str, why: str) -> None:
        print(f"accelbench: explaining {label} ({why})", file=sys.stderr, flush=True)

    def profiling(self, side: str, number: int, total: int) -> None:
        now = time.monotonic()
        if self._started is None:
            self._started = now
        left = ""
        if self._done:
            each = (now - self._started) / self._done
            left = f"; ~{each * (2 * total - self._done):.0f} s left"
        print(f"accelbench: profiling side {side.upper()} ({number} of {total}{left})",
              file=sys.stderr, flush=True)
        self._done += 1

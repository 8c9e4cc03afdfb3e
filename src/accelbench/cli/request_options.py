"""The options of `accelbench run` that make its request, and the request they make:
shared by `run` and by the Slurm jobs that run it (`slurm qualify -- RUN_OPTIONS`), so a
job's options are read, checked and turned into the request it is handed before it is
submitted."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import NoReturn

from accelbench.cli.options import (
    add_device,
    add_ranks,
    add_report,
    add_telemetry,
    name_arg,
    names_arg,
    parse_overrides,
    path_arg,
    positive_int,
    positive_percentage,
    positive_seconds,
    split_list,
    telemetry_settings,
)
from accelbench.core.request import RUN, RequestError, RunRequest, Setting
from accelbench.errors import UserError


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """The options that make a run's request (`request_of` reads them)."""
    # No default here ("quick" is the request's): --resume and --request tell a --suite
    # given.
    parser.add_argument("--suite", type=name_arg,
                        help="quick (default), standard or full")
    parser.add_argument("--bench", nargs="+", type=names_arg, metavar="NAME",
                        help="only these benchmarks (with the suite's grids for them)")
    add_device(parser)
    parser.set_defaults(device=None)  # "auto" (the request's); --resume tells one given
    parser.add_argument("--dtype", nargs="+", type=names_arg, metavar="DTYPE",
                        help="precisions to measure, replacing the suite's: fp64 fp32 tf32 "
                        "fp16 bf16 fp8 int8")
    parser.add_argument("-p", "--param", action="append", metavar="NAME=V[,V]",
                        help="set a parameter for every selected benchmark that has it "
                        "(repeatable; comma-separated values make a grid)")
    parser.add_argument("--max-time", type=positive_seconds, metavar="S",
                        help="seconds of sampling per case (default: the suite's)")
    parser.add_argument("--target-ci", type=positive_percentage, metavar="PCT",
                        help="stop sampling once the median's 95%% CI is within ±PCT%%")
    parser.add_argument("--flush-cache", action="store_true",
                        help="flush device caches before every sample (kernel benchmarks)")
    parser.add_argument("--nproc-per-node", type=positive_int, metavar="N",
                        help="ranks for distributed benchmarks (collectives, data-parallel "
                        "training), started on this node with torchrun (default: as the "
                        "suite says, else 1)")
    add_ranks(parser)
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="CPU threads per process for CPU cases (default: all but one "
                        "of the CPUs this process may use, split between the ranks of a "
                        "distributed case, whatever the host's load); part of each CPU "
                        "case's identity")
    parser.add_argument("--wait-quiet", type=positive_seconds, metavar="S",
                        help="before each case, wait up to S seconds for the host to be quiet "
                        "(no other busy process, no steal time)")
    add_telemetry(parser)
    parser.add_argument("--timeout", type=positive_seconds, metavar="S",
                        help="fail a case that takes longer than this (default: per benchmark)")
    parser.add_argument("--repeat", type=positive_int, metavar="N",
                        help="make N runs in a row of the same request, each stored as its "
                        "own run (default: the suite's, else 1); Ctrl-C stops them all")
    add_report(parser)


def add_request_file(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--request", type=path_arg, metavar="FILE",
                        help=f"run the request in FILE (JSON, as `accelbench show RUN "
                        f"--request` prints it) instead of one made of {command}'s options "
                        f"('-' reads standard input)")


def request_of(args: argparse.Namespace) -> RunRequest:
    """The request of `run`'s options (their types have checked each value)."""
    timing: dict[str, Setting] = {}
    if args.max_time is not None:
        timing["max_time"] = args.max_time
    if args.target_ci is not None:
        timing["target_rel_ci"] = args.target_ci / 100.0
    if args.flush_cache:
        timing["flush_cache"] = True
    return RunRequest(
        command=RUN,
        suite=args.suite or "quick",
        benches=split_list(args.bench),
        overrides=parse_overrides(args.param),
        dtypes=split_list(args.dtype),
        device=args.device or "auto",
        timing={**timing, **telemetry_settings(args)},
        nproc_per_node=args.nproc_per_node,
        backend=args.backend,
        threads=args.threads,
        wait_quiet=args.wait_quiet,
        oversubscribe=args.oversubscribe,
        case_timeout=args.timeout,
        repeat=args.repeat,
        report=args.report,
        no_report=args.no_report,
    )


def read_request(path: str) -> RunRequest:
    """The request in a file a user hands in (`-`: standard input): untrusted, so read
    with a size cap and checked in full; one line saying what is wrong otherwise."""
    import sys

    from accelbench.core.untrusted import read_bytes

    if path == "-":
        data = sys.stdin.buffer.read(_MAX_REQUEST_BYTES + 1)
        if len(data) > _MAX_REQUEST_BYTES:
            raise RequestError(f"--request -: larger than {_MAX_REQUEST_BYTES} bytes")
        return RunRequest.from_json(data, "--request -")
    data = read_bytes(path, "--request", RequestError, _MAX_REQUEST_BYTES)
    return RunRequest.from_json(data, f"--request {path}")


_MAX_REQUEST_BYTES = 1 << 20


# What --request FILE may be given with: where the run is stored, and how it is printed.
BESIDE_REQUEST = frozenset({"request", "store", "json", "quiet"})


def given_or_read(args: argparse.Namespace,
                  build: Callable[[argparse.Namespace], RunRequest],
                  add_arguments: Callable[[argparse.ArgumentParser], None]) -> RunRequest:
    """The request a command that measures runs: the one in `--request FILE`, with none
    of the command's options that would make another (only where it is stored and how
    it is printed); else the one `build` makes of the options."""
    if getattr(args, "request", None) is None:
        return build(args)
    refuse_beside(args, add_arguments, BESIDE_REQUEST,
                  "--request runs the request in the file")
    return read_request(args.request)


def refuse_beside(args: argparse.Namespace,
                  add_arguments: Callable[[argparse.ArgumentParser], None],
                  allowed: frozenset[str], why: str) -> None:
    """Refuse, in one line that begins with `why`, the options of a command (those
    `add_arguments` adds) given a value other than their default, but for the `allowed`
    destinations: beside --request or --resume, they would make another request."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    given = options_given(args, parser._actions, allowed)
    if given:
        raise UserError(f"{why}: leave out {', '.join(given)}")


def options_given(args: argparse.Namespace, actions: Sequence[argparse.Action],
                  allowed: frozenset[str]) -> list[str]:
    """The options among `actions` given a value other than their default, but for the
    `allowed` destinations, as written."""
    return [action.option_strings[-1] for action in actions
            if action.option_strings and action.dest not in allowed
            and getattr(args, action.dest, action.default) != action.default]


class StrictParser(argparse.ArgumentParser):
    """A command line read outside the main parser (a Slurm job's run options): a mistake
    is one line, as any other bad input."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{self.prog}: {message}")

"""`accelbench validate`: is this stack correct and complete? Run the validation checks
(the `validate` suite), store each with its verdict, print them failing first; the exit
code is 1 when any check failed."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    add_device,
    add_json,
    add_report,
    add_store,
    add_telemetry,
    fraction,
    names_arg,
    positive_number,
    positive_seconds,
    split_list,
    store_location,
    telemetry_settings,
)
from accelbench.cli.request_options import add_request_file
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.core.registry import Registry
    from accelbench.core.request import RunRequest

NAME = "validate"
HELP = ("check that this node and stack are healthy and compute correctly: the node's "
        "health, numerics per precision, mixed precision, determinism, compile and export, "
        "torchvision/torchaudio/torchtext/torchrec, collectives, device memory, and with "
        "--level or --burn the copy matrix and a burn-in; exit 1 if a check fails")
SUITE = "validate"
BURN_IN = "burn-in"
MEMTEST = "memtest"
DETERMINISM = "determinism"
# cuBLAS reads its workspace setting once per process: the deterministic one is set
# before the workers start (PyTorch's reproducibility notes ask for it).
CUBLAS_CONFIG = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
HEALTH = "health"
COPY_MATRIX = "copy-matrix"
STRESS = "stress"
# --level, as DCGM's diagnostic levels; each family says which of its checks a level runs
# (core.family.Family.levels): 1 the node's health only (seconds); 2 that, every check,
# the copy matrix and a short burn-in (minutes); 3 the same with a long stress (GEMM and
# memory at once, judged on throttling, clocks and ECC) in place of the burn-in. A level's
# load runs last, for the seconds given here (or --burn).
LEVELS = (1, 2, 3)
LEVEL_LOAD = {2: (BURN_IN, 60.0), 3: (STRESS, 600.0)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device(parser)
    parser.add_argument("--check", nargs="+", type=names_arg, metavar="NAME",
                        help="only these checks (default: every check but burn-in; "
                        "`accelbench list --family validation` lists them)")
    parser.add_argument("--dtype", nargs="+", type=names_arg, metavar="DTYPE",
                        help="only these precisions, for the checks that have one: fp32 tf32 "
                        "fp16 bf16 fp8")
    parser.add_argument("--tolerance-scale", type=positive_number, metavar="X",
                        help="multiply every check's tolerance by X, a positive number "
                        "(2 allows twice the error; default 1)")
    parser.add_argument("--level", type=int, choices=LEVELS, metavar="N",
                        help="how deep, as DCGM's levels: 1 the node's health only (seconds); "
                        "2 health, every check, the copy matrix and a 60 s burn-in; 3 the "
                        "same with a 600 s stress (GEMM and memory at once, failing on "
                        "throttling, a sagging clock or rising ECC) for the burn-in; --burn "
                        "sets either's length")
    parser.add_argument("--burn", type=positive_seconds, metavar="SECONDS",
                        help="also run the burn-in: sustained GEMM for SECONDS, checked every "
                        "few calls, with the throughput per interval")
    parser.add_argument("--memtest-fraction", type=fraction, metavar="F",
                        help="share of the free device memory the memory test fills, between "
                        "0 and 1 (default 0.8; on the CPU at most 256 MiB)")
    add_telemetry(parser)
    add_report(parser)
    add_request_file(parser, NAME)
    add_store(parser)
    add_json(parser)


def selected_checks(names: Sequence[str], registry: Registry) -> tuple[str, ...]:
    """The checks asked for, each known; an unknown name is refused with the nearest."""
    known = registry.checks()
    for name in names:
        if name in known:
            continue
        if name in registry:
            raise UserError(f"{name!r} is a benchmark, not a check: measure it with "
                            f"`accelbench run --bench {name}`")
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UserError(f"unknown check {name!r}{hint}; checks: {', '.join(known)}")
    return tuple(names)


def build_request(args: argparse.Namespace, registry: Registry) -> RunRequest:
    from accelbench.core.request import RunRequest

    checks = list(selected_checks(split_list(args.check), registry))
    if checks and args.level is not None:
        raise UserError("--level chooses the checks: give --level or --check, not both")
    if not checks:
        checks = level_checks(args.level, registry)
    load, seconds = LEVEL_LOAD.get(args.level or 0, (BURN_IN, None))
    burn = args.burn if args.burn is not None else seconds
    if burn is not None and load not in checks:
        checks.append(load)
    values: dict[str, tuple[float]] = {}
    if burn is not None:
        values["seconds"] = (burn,)
    if args.tolerance_scale is not None:
        if not any(registry.get(c).param("tolerance_scale") for c in checks):
            raise UserError(f"--tolerance-scale: none of the selected checks "
                            f"({', '.join(checks)}) has a tolerance")
        values["tolerance_scale"] = (args.tolerance_scale,)
    if args.memtest_fraction is not None:
        if MEMTEST not in checks:
            raise UserError(f"--memtest-fraction applies to the {MEMTEST} check, which is "
                            "not selected")
        values["fraction"] = (args.memtest_fraction,)
    return RunRequest(command=NAME, suite=SUITE, benches=tuple(checks), values=values,
                      dtypes=split_list(args.dtype), device=args.device,
                      timing=telemetry_settings(args), report=args.report,
                      no_report=args.no_report)


def level_checks(level: int | None, registry: Registry) -> list[str]:
    """The checks of a level (None: the validate suite's, every check but the burn-in and
    the copy matrix): those of the suite first, in its order, then the others the
    families name at that level, its load left for last."""
    from accelbench.runner.plan import load_suite

    suite = load_suite(SUITE, registry).benchmarks()
    if level is None:
        return suite
    load = LEVEL_LOAD.get(level, ("", None))[0]
    named = [name for name in registry.level_checks(level) if name != load]
    return sorted(dict.fromkeys(named), key=lambda name: (
        suite.index(name) if name in suite else len(suite)))


def run(args: argparse.Namespace) -> int:
    from accelbench.app import prepare
    from accelbench.app import run as run_request
    from accelbench.benchmarks import REGISTRY
    from accelbench.cli.printing import print_checks
    from accelbench.cli.progress import TerminalListener
    from accelbench.cli.request_options import given_or_read
    from accelbench.report.terminal import console

    # Bad names and values fail here, before anything starts or the store is opened.
    request = given_or_read(args, lambda given: build_request(given, REGISTRY), add_arguments)
    valid = prepare(request)
    if DETERMINISM in request.benches:
        os.environ.setdefault(*CUBLAS_CONFIG)
    finished = run_request(request, store_location(args), TerminalListener(console(stderr=True)),
                           argv=sys.argv[1:], valid=valid)
    if finished is None:
        return 0  # a rank other than 0: rank 0 prints
    return print_checks(finished, args.json, "Validation")

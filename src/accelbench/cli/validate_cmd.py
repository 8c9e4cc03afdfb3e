"""`accelbench validate`: is this stack correct and complete? Run the validation checks
(the `validate` suite), store each with its verdict, print them failing first; the exit
code is 1 when any check failed."""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    print_json,
    split_list,
    telemetry_settings,
)
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.core.registry import Registry
    from accelbench.runner.plan import Request
    from accelbench.runner.recorder import Outcome

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
# --level, as DCGM's diagnostic levels: 1 the node's health only (seconds); 2 that, every
# check, the copy matrix and a short burn-in (minutes); 3 the same with a long stress
# (GEMM and memory at once, judged on throttling, clocks and ECC) in place of the burn-in.
LEVELS = (1, 2, 3)
LEVEL_LOAD = {2: (BURN_IN, 60.0), 3: (STRESS, 600.0)}
CHECK_FAMILIES = ("validation", "health")


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
    add_store(parser)
    add_json(parser)


def check_names(registry: Registry) -> list[str]:
    return [b.name for b in registry if b.family in CHECK_FAMILIES]


def selected_checks(names: Sequence[str], registry: Registry) -> tuple[str, ...]:
    """The checks asked for, each known; an unknown name is refused with the nearest."""
    known = check_names(registry)
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


def build_request(args: argparse.Namespace, registry: Registry) -> Request:
    from accelbench.runner.plan import Request, load_suite

    checks = list(selected_checks(split_list(args.check), registry))
    if checks and args.level is not None:
        raise UserError("--level chooses the checks: give --level or --check, not both")
    if not checks:
        checks = level_checks(args.level, load_suite(SUITE).benchmarks())
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
    return Request(suite=SUITE, benches=tuple(checks), values=values,
                   dtypes=split_list(args.dtype), device=args.device,
                   timing=telemetry_settings(args))


def level_checks(level: int | None, suite: Sequence[str]) -> list[str]:
    """The checks of a level (None: the suite's, every check but the burn-in and the
    copy matrix)."""
    if level == 1:
        return [HEALTH]
    if level is None:
        return list(suite)
    return [*suite, *([COPY_MATRIX] if COPY_MATRIX not in suite else [])]


def run(args: argparse.Namespace) -> int:
    from accelbench.benchmarks import REGISTRY
    from accelbench.cli.run_cmd import run_request
    from accelbench.runner.plan import validate

    # Bad names and values fail here, before anything starts or the store is opened.
    valid = validate(build_request(args, REGISTRY), REGISTRY)
    if DETERMINISM in valid.request.benches:
        os.environ.setdefault(*CUBLAS_CONFIG)
    return run_request(args, valid, _finish)


def _finish(args: argparse.Namespace, outcome: Outcome, store_location: str,
            report: Path | None) -> int:
    return print_checks(args, outcome, store_location, report, "Validation")


def print_checks(args: argparse.Namespace, outcome: Outcome, store_location: str,
                 report: Path | None, title: str, **extra: Any) -> int:
    """A run of checks as `validate` and `health` print it: with --json the run, a tally,
    every check and `extra`; else the run's sections and a summary line. Returns the
    run's exit code."""
    from accelbench.analysis.checks import check_results, tally
    from accelbench.benchmarks.validation.view import summary_line
    from accelbench.cli.run_cmd import outcome_json
    from accelbench.report.run_view import run_sections
    from accelbench.report.terminal import console, print_sections
    from accelbench.report.text import text

    if args.json:
        results = check_results(outcome.measurements)
        print_json(outcome_json(outcome, store_location, report, summary=tally(results),
                                checks=[r.to_dict() for r in results], **extra))
    else:
        out = console()
        out.print(text(f"{title} {outcome.run_id}: {outcome.fingerprint.generation_key}"))
        print_sections(run_sections(outcome.measurements), out)
        out.print(text(summary_line(outcome.measurements)
                       + (" (interrupted)" if outcome.interrupted else "")))
        out.print(text(f"Stored in {store_location} as run {outcome.run_id}"))
        if report:
            out.print(text(f"Report: {report}"))
    return outcome.exit_code

"""The options of `accelbench validate` that make its request, and the request they
make: shared by `validate` and by the Slurm jobs that run it (`slurm qualify --level N`),
so a job's checks are chosen and checked before it is submitted."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accelbench.cli.options import (
    add_device,
    add_report,
    add_telemetry,
    fraction,
    names_arg,
    positive_number,
    positive_seconds,
    split_list,
    telemetry_settings,
)
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.core.registry import Registry
    from accelbench.core.request import RunRequest

COMMAND = "validate"

SUITE = "validate"
BURN_IN = "burn-in"
MEMTEST = "memtest"
HEALTH = "health"
COPY_MATRIX = "copy-matrix"
STRESS = "stress"
GATE = "gate"
# --level, as DCGM's and RVS's levels; each family says which of its checks a level runs
# (core.family.Family.levels): 1 the node's health and the gates that read the node's
# configuration (seconds); 2 that, every check, the copy matrix, the figures gated at
# level 2 (bandwidths, short GEMMs) and a short burn-in (minutes); 3 the same with
# longer GEMMs, the power under load and a long stress (GEMM and memory at once, judged
# on throttling, clocks and ECC) in place of the burn-in; 4 all of it with the training
# gate and a soak: the stress and then the burn-in. A level's loads run last, each for
# the seconds given here (or --burn).
LEVELS = (1, 2, 3, 4)
LEVEL_LOADS: dict[int, tuple[tuple[str, ...], float]] = {
    2: ((BURN_IN,), 60.0), 3: ((STRESS,), 600.0), 4: ((STRESS, BURN_IN), 900.0)}


def add_validate_options(parser: argparse.ArgumentParser) -> None:
    """The options that make validate's request (`validate_request` reads them)."""
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
                        help="how deep, as DCGM's and RVS's levels: 1 the node's health and "
                        "configuration gates (seconds); 2 adds every check, the copy matrix, "
                        "bandwidths and short GEMMs against the GPU model's gates and a 60 s "
                        "burn-in; 3 longer GEMMs, the power under load and a 600 s stress "
                        "(failing on throttling, a sagging clock or rising ECC) for the "
                        "burn-in; 4 adds the training gate and a soak (900 s stress, then "
                        "900 s burn-in); --burn sets the loads' length")
    parser.add_argument("--burn", type=positive_seconds, metavar="SECONDS",
                        help="also run the burn-in: sustained GEMM for SECONDS, checked every "
                        "few calls, with the throughput per interval")
    parser.add_argument("--memtest-fraction", type=fraction, metavar="F",
                        help="share of the free device memory the memory test fills, between "
                        "0 and 1 (default 0.8; on the CPU at most 256 MiB)")
    add_telemetry(parser)
    add_report(parser)


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


def validate_request(args: argparse.Namespace, registry: Registry) -> RunRequest:
    """The request of validate's options (their types have checked each value)."""
    from accelbench.core.request import RunRequest

    checks = list(selected_checks(split_list(args.check), registry))
    if checks and args.level is not None:
        raise UserError("--level chooses the checks: give --level or --check, not both")
    if not checks:
        checks = level_checks(args.level, registry)
    loads, seconds = LEVEL_LOADS.get(args.level or 0, ((BURN_IN,), None))
    burn = args.burn if args.burn is not None else seconds
    if burn is not None:
        checks.extend(load for load in loads if load not in checks)
    values: dict[str, tuple[Any, ...]] = {}
    if burn is not None:
        values["seconds"] = (burn,)
    if GATE in checks:
        # Every figure: those with no gate for this node's GPU model at the level are
        # not planned (the gate check's `applies`).
        figure = registry.get(GATE).param("figure")
        values["figure"] = tuple(figure.choices or ()) if figure is not None else ()
        values["level"] = (args.level or 2,)
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
    return RunRequest(command=COMMAND, suite=SUITE, benches=tuple(checks), values=values,
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
    loads = LEVEL_LOADS.get(level, ((), None))[0]
    named = [name for name in registry.level_checks(level) if name not in loads]
    return sorted(dict.fromkeys(named), key=lambda name: (
        suite.index(name) if name in suite else len(suite)))

"""`accelbench profile BENCH`: one case under the PyTorch profiler, its trace and analysis."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    StoreOnFirstUse,
    add_device,
    add_json,
    add_ranks,
    add_store,
    name_arg,
    non_negative_int,
    open_store,
    path_arg,
    positive_int,
    print_json,
)
from accelbench.errors import UserError

if TYPE_CHECKING:
    from pathlib import Path

    from accelbench.profile.capture import Schedule
    from accelbench.profile.session import ProfileOutcome
    from accelbench.runner.plan import ValidRequest

NAME = "profile"
HELP = "profile one benchmark case with the PyTorch profiler and analyse the trace"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bench", type=name_arg, metavar="BENCH", help="the benchmark to profile")
    parser.add_argument("-p", "--param", action="append", metavar="NAME=V",
                        help="set a parameter (repeatable; one value each)")
    parser.add_argument("--dtype", type=name_arg, metavar="DTYPE",
                        help="the precision, for benchmarks with one")
    add_device(parser)
    parser.add_argument("--steps", type=positive_int, default=5, metavar="N",
                        help="active (recorded) steps (default 5)")
    parser.add_argument("--warmup", type=non_negative_int, default=2, metavar="N",
                        help="steps profiled but discarded first (default 2)")
    parser.add_argument("--wait", type=non_negative_int, default=1, metavar="N",
                        help="steps run without the profiler before those (default 1)")
    parser.add_argument("--memory", action="store_true",
                        help="record memory allocations (peak memory in the analysis)")
    parser.add_argument("--nproc-per-node", type=positive_int, default=1, metavar="N",
                        help="profile on N ranks started here with torchrun (collectives, "
                        "data-parallel training); each rank writes its own trace")
    add_ranks(parser)
    parser.add_argument("--output", type=path_arg, metavar="DIR",
                        help="directory for the traces, one folder per run "
                        "(default: profiles/ beside the store)")
    add_store(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from accelbench.benchmarks import REGISTRY
    from accelbench.cli.run_cmd import parse_overrides
    from accelbench.profile.capture import Schedule
    from accelbench.profile.session import check_request, profile_session
    from accelbench.runner.distributed import check_backend, launched_by_torchrun
    from accelbench.runner.plan import Request

    try:
        schedule = Schedule(wait=args.wait, warmup=args.warmup, active=args.steps,
                            memory=args.memory)
    except ValueError as exc:
        raise UserError(f"invalid schedule: {exc}") from None
    request = Request(benches=(args.bench,), overrides=parse_overrides(args.param),
                      dtypes=(args.dtype,) if args.dtype else (), device=args.device,
                      nproc_per_node=args.nproc_per_node, backend=args.backend)
    # Bad input fails here, once, before the store is touched.
    valid = check_request(request, REGISTRY)
    kind, _ = valid.device
    if kind != "auto":
        check_backend(request.backend, kind)
    output = Path(args.output) if args.output else None
    if launched_by_torchrun():
        return _profile_as_rank(args, valid, schedule, output)
    if (request.nproc_per_node or 1) > 1:
        return _launch_ranks(args, kind)
    with open_store(args, create=True) as store:
        outcome = profile_session(valid, store, schedule, output, argv=sys.argv[1:])
        store_location = store.name
    return _finish(args, outcome, store_location)


def _profile_as_rank(args: argparse.Namespace, valid: ValidRequest, schedule: Schedule,
                     output: Path | None) -> int:
    """Under torchrun: every rank profiles; rank 0 stores and prints."""
    from accelbench.profile.session import profile_as_rank

    with StoreOnFirstUse(args) as store:
        outcome = profile_as_rank(valid, schedule, store, output, argv=sys.argv[1:])
        if outcome is None:
            return 0
        return _finish(args, outcome, store().name)


def _launch_ranks(args: argparse.Namespace, device_kind: str) -> int:
    """Start this same command on N ranks with torchrun (runner.launcher); rank 0
    prints."""
    from accelbench.runner.capacity import check_ranks
    from accelbench.runner.launcher import run_torchrun

    if device_kind == "cpu":  # GPU ranks are checked against the devices by each rank
        warning = check_ranks(args.nproc_per_node, "cpu", 0, args.oversubscribe)
        if warning:
            print(f"accelbench: warning: {warning}", file=sys.stderr)
    return run_torchrun(args.nproc_per_node, rank_argv(args))


def rank_argv(args: argparse.Namespace) -> list[str]:
    """This command's arguments for each rank (without --nproc-per-node)."""
    out = [NAME, args.bench]
    for item in args.param or ():
        out += ["-p", item]
    options = (("--dtype", args.dtype), ("--device", args.device), ("--steps", args.steps),
               ("--warmup", args.warmup), ("--wait", args.wait), ("--backend", args.backend),
               ("--output", args.output), ("--store", args.store))
    for option, value in options:
        if value is not None:
            out += [option, str(value)]
    out += [flag for flag, on in (("--memory", args.memory), ("--json", args.json)) if on]
    return out


def _finish(args: argparse.Namespace, outcome: ProfileOutcome, store_location: str) -> int:
    if args.json:
        print_json({
            "run_id": outcome.run_id,
            "status": outcome.status,
            "store": str(store_location),
            "trace_dir": str(outcome.trace_dir),
            "traces": [str(p) for p in outcome.trace_paths],
            "problems": outcome.problems,
            "measurement": outcome.measurement.export_dict(),
            "analysis": outcome.analysis,
        })
    else:
        _print(outcome, store_location)
    return outcome.exit_code


def _print(outcome: ProfileOutcome, store_location: str) -> None:
    from accelbench.core.units import format_value
    from accelbench.report.run_view import profile_tables
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console
    from accelbench.report.text import text

    out = console()
    m = outcome.measurement
    out.print(text(f"Profile of {m.case.label}", "bold")
              + text(f" on {outcome.fingerprint.generation_key}"), soft_wrap=True)
    if not m.ok:
        out.print(text(f"{m.status}: {m.reason}"))
    elif m.primary is not None:
        shown = ", ".join(format_value(f.value, f.unit) for f in m.figures[:2])
        out.print(text(f"{shown} (under the profiler: its overhead included)"))
    for problem in outcome.problems:
        out.print(text(f"problem: {problem}"))
    if outcome.analysis and "error" not in outcome.analysis:
        # The tables a run's report shows of its profile (report.run_view).
        render_rich(profile_tables(outcome.analysis, "Summary"), out)
    for path in outcome.trace_paths:
        out.print(text(f"Trace: {path}"), soft_wrap=True)
    if outcome.trace_paths:
        out.print(text("Open it in Perfetto, or run: tensorboard --logdir "
                       f"{outcome.trace_dir.parent}"), soft_wrap=True)
    out.print(text(f"Stored in {store_location} as run {outcome.run_id}"), soft_wrap=True)

"""`accelbench profile BENCH`: one case under the PyTorch profiler, its trace and analysis."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    add_device,
    add_json,
    add_ranks,
    add_store,
    name_arg,
    non_negative_int,
    parse_overrides,
    path_arg,
    positive_int,
    print_json,
    store_location,
)
from accelbench.cli.request_options import add_request_file
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.app import Profiled
    from accelbench.core.request import RunRequest
    from accelbench.profile.session import ProfileOutcome

NAME = "profile"
HELP = "profile one benchmark case with the PyTorch profiler and analyse the trace"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bench", type=name_arg, metavar="BENCH", nargs="?",
                        help="the benchmark to profile")
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
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="CPU threads per process for a CPU case (default: as `run` "
                        "chooses them, all but one of the CPUs this process may use, split "
                        "between the ranks)")
    parser.add_argument("--output", type=path_arg, metavar="DIR",
                        help="directory for the traces, one folder per run "
                        "(default: profiles/ beside the store)")
    add_request_file(parser, NAME)
    add_store(parser)
    add_json(parser)


def build_request(args: argparse.Namespace) -> RunRequest:
    """The profile request of the options (their types have checked each value)."""
    from accelbench.core.request import ProfileRequest, RunRequest

    if args.bench is None:
        raise UserError("profile: give the benchmark to profile (or --request FILE)")
    return RunRequest(
        command=NAME, suite=NAME, benches=(args.bench,), overrides=parse_overrides(args.param),
        dtypes=(args.dtype,) if args.dtype else (), device=args.device,
        nproc_per_node=args.nproc_per_node, backend=args.backend,
        oversubscribe=args.oversubscribe, threads=args.threads,
        profile=ProfileRequest(wait=args.wait, warmup=args.warmup, active=args.steps,
                               memory=args.memory, output=args.output))


def run(args: argparse.Namespace) -> int:
    from accelbench import app
    from accelbench.cli.request_options import given_or_read

    # Bad input fails here, once, before the store is touched.
    request = given_or_read(args, build_request, add_arguments)
    if request.profile is None:
        raise UserError("profile: the request has no `profile` settings: run it with "
                        "`accelbench run --request FILE`")
    location = store_location(args)
    profiled = app.profile(request, location, argv=sys.argv[1:])
    if profiled is not None:
        return _finish(args, profiled)
    from accelbench.runner.distributed import launched_by_torchrun

    if launched_by_torchrun():
        return 0  # a rank other than 0: rank 0 prints
    return app.profile_ranks(request, location, ["--json"] if args.json else [])


def _finish(args: argparse.Namespace, profiled: Profiled) -> int:
    outcome, store_location = profiled.outcome, profiled.store
    if args.json:
        print_json({
            "run_id": outcome.run_id,
            "status": outcome.status,
            "store": str(store_location),
            "trace_dir": str(outcome.trace_dir),
            "traces": [str(p) for p in outcome.trace_paths],
            "problems": outcome.problems,
            "threads": _threads(outcome),
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
    threads = _threads(outcome)
    if threads is not None:
        out.print(text(f"CPU threads: {threads['used']}; {threads['source']}"), soft_wrap=True)
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


def _threads(outcome: ProfileOutcome) -> dict[str, object] | None:
    """The CPU threads the case ran on and how the count was chosen; None off the CPU."""
    used = outcome.measurement.details.get("threads_used")
    if used is None:
        used = outcome.measurement.case.param_dict.get("threads")
    source = outcome.fingerprint.data.get("threads_source")
    if used is None and source is None:
        return None
    return {"used": used, "source": source}

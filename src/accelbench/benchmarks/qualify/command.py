"""`accelbench qualify`: does this node do what its GPU model should? The levels of
`accelbench validate --level`, judged against the gates of the node's GPU model, with the
modes a scheduler runs before and after a job, and a scan that writes a site's gates
file to start from.

    accelbench qualify --prologue            level 1, one line, exit 0 / 1 / 10
    accelbench qualify --epilogue            level 2, the same
    accelbench qualify --level 3 [--gates F] any level, the checks as validate prints them
    accelbench qualify --init [-o FILE]      write the gates that apply to this node

Exit codes: 0 every check passed (or was skipped with its reason), 1 a check failed
(each failure carries its reason code), and in the prologue and epilogue modes 10 when
the checks could not run at all (no such device, the store unusable, accelbench
itself): a scheduler can then tell a bad node from a node that was not judged.
`--drain` (opt-in) drains a failing node under Slurm with its reason codes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.benchmarks.qualify.declaration import GATES_ENV, NOT_JUDGED
from accelbench.cli.options import add_json, add_store, path_arg, store_location
from accelbench.cli.progress import add_quiet
from accelbench.cli.validate_request import add_validate_options, validate_request
from accelbench.errors import EXIT_NOT_RUN, EXIT_OK, UserError

if TYPE_CHECKING:
    from accelbench.core.measurement import Measurement

NAME = "qualify"
HELP = ("judge this node against the gates of its GPU model (GEMM, memory, host and peer "
        "links, power, training), as DCGM's and RVS's levels 1-4; --prologue/--epilogue "
        "for a scheduler (one line; exit 0 pass, 1 fail, 10 could not run); --init writes "
        "a site gates file from a scan of the node")
PROLOGUE_LEVEL = 1
EPILOGUE_LEVEL = 2
DEFAULT_INIT = "accelbench-gates.yaml"
GATE = "gate"
# Slurm keeps a node's reason short; the codes come first.
_REASON_CHARS = 200
_SCONTROL_TIMEOUT_S = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_validate_options(parser)
    parser.add_argument("--gates", type=gates_file, metavar="FILE",
                        help="a site's gates file (YAML, as --init writes it): its gates "
                        "replace or add to the shipped ones of each GPU model (docs: gates); "
                        f"the checks read it, as they read ${GATES_ENV}")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--prologue", action="store_true",
                      help=f"a job's prologue: level {PROLOGUE_LEVEL}, no report, one line; "
                      "exit 0 pass, 1 fail, 10 could not run")
    mode.add_argument("--epilogue", action="store_true",
                      help=f"a job's epilogue: level {EPILOGUE_LEVEL}, no report, one line; "
                      "the same exit codes")
    mode.add_argument("--init", action="store_true",
                      help="scan this node and write the gates and checks that apply to its "
                      "GPUs, for the site to edit and give back with --gates")
    parser.add_argument("-o", "--output", type=path_arg, metavar="FILE",
                        help=f"with --init: the file to write (default {DEFAULT_INIT}; "
                        "'-' for standard output)")
    parser.add_argument("--force", action="store_true",
                        help="with --init: replace the file if it exists")
    parser.add_argument("--drain", action="store_true",
                        help="when a check fails, drain this node under Slurm (`scontrol "
                        "update ... State=DRAIN`) with the failures' reason codes")
    add_store(parser)
    add_json(parser)
    add_quiet(parser)


def gates_file(text: str) -> str:
    """A gates file given on the command line, read and checked now: a bad file is one
    line and exit 2 before anything runs. Its absolute path is what the checks read."""
    from accelbench.benchmarks.qualify.gates import load_gates

    path = str(Path(text).expanduser().absolute())
    load_gates(path)
    return path


def run(args: argparse.Namespace) -> int:
    if args.init:
        return _init(args)
    if args.output is not None or args.force:
        raise UserError("--output and --force go with --init")
    one_line = args.prologue or args.epilogue
    if not one_line:
        return _qualify(args)
    started = time.monotonic()
    try:
        return _qualify(args)
    except Exception as exc:  # a scheduler tells "not judged" from "failed" by the code
        from accelbench.core.untrusted import clip

        said = exc if isinstance(exc, UserError) else f"unexpected {type(exc).__name__}: {exc}"
        print(f"accelbench qualify: could not run: {clip(said)}", file=sys.stderr)
        print(f"accelbench qualify level {_level(args)}: NOT RUN on {_host()} "
              f"({time.monotonic() - started:.1f} s)")
        return EXIT_NOT_RUN


def _level(args: argparse.Namespace) -> int:
    if args.prologue:
        return PROLOGUE_LEVEL
    if args.epilogue:
        return EPILOGUE_LEVEL
    return int(args.level or EPILOGUE_LEVEL)


def _qualify(args: argparse.Namespace) -> int:
    from accelbench.app import prepare
    from accelbench.app import run as run_request
    from accelbench.benchmarks import REGISTRY
    from accelbench.cli.printing import print_checks
    from accelbench.cli.progress import progress_listener

    one_line = args.prologue or args.epilogue
    if one_line and args.level is not None and args.level != _level(args):
        raise UserError(f"--{'prologue' if args.prologue else 'epilogue'} runs level "
                        f"{_level(args)}: leave --level out")
    if args.check:
        raise UserError("qualify runs a level's checks: use `accelbench validate --check` "
                        "for single checks")
    args.level = _level(args)
    if one_line:
        args.quiet = True
        if not args.report:
            args.no_report = True
    request = dataclasses.replace(validate_request(args, REGISTRY), command=NAME)
    if args.gates:
        os.environ[GATES_ENV] = args.gates  # read by the planner and by every worker
    started = time.monotonic()
    valid = prepare(request)
    finished = run_request(request, store_location(args), progress_listener(args),
                           argv=sys.argv[1:], valid=valid)
    if finished is None:
        return EXIT_OK  # a rank other than 0: rank 0 prints
    measurements = finished.outcome.measurements
    failed = failures(measurements)
    if one_line:
        print(one_line_verdict(args.level, _host(), measurements, failed,
                               time.monotonic() - started))
        code = finished.outcome.exit_code
    else:
        code = print_checks(finished, args.json, "Qualification", level=args.level,
                            failures=[{"code": c, "subject": s, "check": k}
                                      for c, s, k, _ in failed])
    if failed and args.drain:
        drain(_host(), failed)
    return code


def failures(measurements: Sequence[Measurement]) -> list[tuple[str, str, str, str]]:
    """(code, subject, check, message) of every failure: a failing finding's own, or for
    a check without findings its check's code, with the check as the subject."""
    from accelbench.analysis.checks import FAIL, check_results
    from accelbench.benchmarks.health.view import findings_of

    out: list[tuple[str, str, str, str]] = []
    results = check_results(measurements)
    by_key = {m.case.key: m for m in measurements}
    for result in results:
        if result.verdict != FAIL:
            continue
        m = by_key.get(result.key)
        found = [f for f in findings_of(m) if f.level == "fail"] if m is not None else []
        if found:
            out.extend((f.code or _first(result.codes), f.subject, result.name, f.message)
                       for f in found)
        else:
            out.append((_first(result.codes), result.name, result.name, result.reason))
    return out


def _first(codes: Sequence[str]) -> str:
    return codes[0] if codes else "ACCEL_CHECK_ERROR"


def one_line_verdict(level: int, host: str, measurements: Sequence[Measurement],
                     failed: Sequence[tuple[str, str, str, str]], seconds: float) -> str:
    """The prologue's line: "accelbench qualify level 1: PASS on gpu07 (13 checks: 5
    passed, 8 skipped; 6.8 s)", or FAIL with each failure's code and subject first."""
    from accelbench.analysis.checks import summary_line

    tally = summary_line(measurements)
    # A GPU model with no gates passes on its health alone: the line says so.
    ungated = next((m.reason for m in measurements if m.case.benchmark == GATE
                    and m.reason and m.reason.startswith(NOT_JUDGED)), None)
    if ungated:
        tally += f"; {ungated.split(':', 2)[1].strip()}: not judged against gates"
    if not failed:
        return f"accelbench qualify level {level}: PASS on {host} ({tally}; {seconds:.1f} s)"
    named = ", ".join(f"{code} {subject}" for code, subject, _, _ in failed)
    return f"accelbench qualify level {level}: FAIL on {host}: {named} ({tally}; {seconds:.1f} s)"


def _host() -> str:
    """This node's name as Slurm knows it: SLURMD_NODENAME in a prologue, else the short
    host name."""
    from accelbench.slurm.drain import plain_host

    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]
    return name if plain_host(name) else "this-node"


def drain_reason(failed: Sequence[tuple[str, str, str, str]]) -> str:
    """The node's drain reason: "accelbench ACCEL_ECC_DBE gpu3, ACCEL_..." cut to what
    Slurm keeps, of plain characters only (subjects come from the node's own readings)."""
    parts = [f"{code} {subject}" for code, subject, _, _ in failed]
    text = "accelbench " + ", ".join(dict.fromkeys(parts))
    plain = "".join(c if c.isascii() and (c.isalnum() or c in " ,._:-") else "_" for c in text)
    return plain[:_REASON_CHARS]


def drain(host: str, failed: Sequence[tuple[str, str, str, str]]) -> bool:
    """Drain `host` with the failures' codes; say on stderr what happened. False when
    scontrol could not be run or refused: the exit code stays the checks'."""
    import shutil
    import subprocess

    scontrol = shutil.which("scontrol")
    if scontrol is None:
        print("accelbench: could not drain: scontrol is not on PATH", file=sys.stderr)
        return False
    argv = [scontrol, "update", f"NodeName={host}", "State=DRAIN",
            f"Reason={drain_reason(failed)}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True,
                              timeout=_SCONTROL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"accelbench: could not drain {host}: {exc}", file=sys.stderr)
        return False
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        print(f"accelbench: scontrol could not drain {host}: "
              f"{said[-1] if said else f'exit {done.returncode}'}", file=sys.stderr)
        return False
    print(f"accelbench: drained {host}: {drain_reason(failed)}", file=sys.stderr)
    return True


def _init(args: argparse.Namespace) -> int:
    """Scan the node, write the gates of its GPU model for the site to edit."""
    from accelbench.benchmarks.qualify.gates import init_yaml, load_gates, select
    from accelbench.env.fingerprint import collect

    if args.prologue or args.epilogue or args.drain:
        raise UserError("--init writes a gates file: it runs no checks")
    target = args.output or DEFAULT_INIT
    if target != "-" and Path(target).exists() and not args.force:
        raise UserError(f"{target} exists: give --force to replace it, or -o another file")
    fingerprint = collect(args.device or "auto")
    device = fingerprint.device
    names = [str(n) for n in fingerprint.data.get("devices", {}).get("names", [])]
    model, why = select(device, load_gates(args.gates))
    if model is None:
        raise UserError(f"nothing to write: {why}")
    text = init_yaml([model], int(args.level or 4))
    if len(set(names)) > 1:
        text = (f"# This node's devices are not all alike ({', '.join(sorted(set(names)))}): "
                f"these are the gates of device 0, {device.name}.\n{text}")
    if target == "-":
        sys.stdout.write(text)
    else:
        try:
            Path(target).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{target}: cannot be written: {exc.strerror or exc}") from None
    shown = "standard output" if target == "-" else target
    print(f"accelbench: {why}; {len(model.gates)} gates written to {shown}; edit them and "
          f"run `accelbench qualify --gates {target if target != '-' else 'FILE'}`",
          file=sys.stderr)
    return EXIT_OK


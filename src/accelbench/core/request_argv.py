"""The request of a run stored before requests were: read from its command line, once.

Until request format 1 a run kept only the command line that made it, and `run --resume`
parsed it again with the options `run` had then. This reads such a command line with
those options, frozen here as they were, into a `RunRequest`; the store's migration calls
it for every stored run, and an export of that time is upgraded by it on load. Options
that `run` gains from now on belong to the request, never here.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from accelbench.core.request import RUN, RunRequest

__all__ = ["request_from_argv"]


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _Refused(message or "exit")


def _parser() -> _Parser:
    p = _Parser(add_help=False, allow_abbrev=False)
    p.add_argument("--suite")
    p.add_argument("--bench", nargs="+")
    p.add_argument("--device")
    p.add_argument("--dtype", nargs="+")
    p.add_argument("-p", "--param", action="append")
    p.add_argument("--max-time", type=float)
    p.add_argument("--target-ci", type=float)
    p.add_argument("--flush-cache", action="store_true")
    p.add_argument("--nproc-per-node", type=int)
    p.add_argument("--oversubscribe", action="store_true")
    p.add_argument("--backend")
    p.add_argument("--threads", type=int)
    p.add_argument("--wait-quiet", type=float)
    p.add_argument("--telemetry-interval", type=float)
    p.add_argument("--no-telemetry", action="store_true")
    p.add_argument("--telemetry-source", nargs="+")
    p.add_argument("--timeout", type=float)
    p.add_argument("--resume")
    p.add_argument("--repeat", type=int)
    p.add_argument("--report")
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--store")
    p.add_argument("--json", action="store_true")
    return p


def _split(values: Sequence[str] | None) -> tuple[str, ...]:
    out = [v.strip() for value in values or () for v in value.split(",") if v.strip()]
    return tuple(dict.fromkeys(out))


def request_from_argv(argv: Sequence[Any]) -> RunRequest | None:
    """The request of a stored `accelbench run` command line; None for another command's
    (they were never resumable) or one that does not read as `run`'s options did."""
    if not argv or argv[0] != RUN or not all(isinstance(w, str) for w in argv):
        return None
    try:
        args = _parser().parse_args(list(argv[1:]))
    except _Refused:
        return None
    overrides: dict[str, tuple[str, ...]] = {}
    for item in args.param or ():
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            return None
        overrides[name.strip()] = (*overrides.get(name.strip(), ()), text.strip())
    timing: dict[str, Any] = {}
    if args.max_time is not None:
        timing["max_time"] = args.max_time
    if args.target_ci is not None:
        timing["target_rel_ci"] = args.target_ci / 100.0
    if args.flush_cache:
        timing["flush_cache"] = True
    if args.no_telemetry:
        timing["telemetry_interval"] = 0.0
    elif args.telemetry_interval is not None:
        timing["telemetry_interval"] = args.telemetry_interval
    if args.telemetry_source:
        timing["telemetry_sources"] = _split(args.telemetry_source)
    return RunRequest(
        command=RUN,
        suite=args.suite or "quick",
        benches=_split(args.bench),
        overrides=overrides,
        dtypes=_split(args.dtype),
        device=args.device or "auto",
        timing=timing,
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

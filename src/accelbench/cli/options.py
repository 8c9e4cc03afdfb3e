"""Options shared by several commands, defined once."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.store import Store, StoreLocation

# -- argument types --------------------------------------------------------------------
# argparse calls these on the text of an option; what they refuse becomes the one-line
# usage error "argument --max-time: expected ..., got 'nan'" (exit 2) before anything
# runs. float() alone takes "nan" and "inf", and a NaN compares false with every bound,
# so it would slip through any later `<= 0` check: a NaN --timeout never times out.


def finite_float(*, above: float | None = None, at_least: float | None = None,
                 below: float | None = None, at_most: float | None = None,
                 what: str = "a finite number") -> Callable[[str], float]:
    """A type for a finite number within bounds; `what` says what it counts."""
    bounds = [f"{word} {bound:g}" for word, bound in (
        ("above", above), ("at least", at_least), ("below", below), ("at most", at_most))
        if bound is not None]
    expected = " ".join([what, " and ".join(bounds)]).strip()

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (above is None or value > above)
                and (at_least is None or value >= at_least)
                and (below is None or value < below)
                and (at_most is None or value <= at_most)):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


# Larger counts are mistakes, and some (an SQL LIMIT, a thread count) overflow C integers.
_MAX_COUNT = 2**31 - 1


def whole_number(*, at_least: int, at_most: int | None = None) -> Callable[[str], int]:
    """A type for a count: an integer (not "2.5", not "nan") of at least `at_least` (and
    at most `at_most`)."""
    most = _MAX_COUNT if at_most is None else at_most

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = at_least - 1
        if value < at_least:
            raise argparse.ArgumentTypeError(
                f"expected a whole number of at least {at_least}, got {text!r}")
        if value > most:
            raise argparse.ArgumentTypeError(
                f"expected a whole number of at most {most}, got {text!r}")
        return value

    parse.__name__ = "count"
    return parse


# Durations: more than about four months is a typo, and would overflow the timedelta of
# a process group's timeout.
positive_seconds = finite_float(above=0, at_most=1e7, what="a finite number of seconds")
positive_int = whole_number(at_least=1)
non_negative_int = whole_number(at_least=0)
# A change or a confidence interval in percent: 100 or more could never be reported.
percentage = finite_float(at_least=0, below=100, what="a percentage")
positive_percentage = finite_float(above=0, below=100, what="a percentage")
# A probability strictly between 0 and 1 (a significance level).
probability = finite_float(above=0, below=1, what="a probability")
# A share of something strictly between 0 and 1 (of the free memory).
fraction = finite_float(above=0, below=1, what="a fraction")
# A factor (a tolerance scale): finite and above 0.
positive_number = finite_float(above=0, what="a positive number")


def name_arg(text: str) -> str:
    """A type for a name or pattern: an empty one is refused rather than taken as "all"."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a name, got {text!r}")
    return text


def names_arg(text: str) -> str:
    """A type for names separated by commas (`fp16,bf16`), none of them empty."""
    if not all(part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError(
            f"expected a name or comma-separated names, got {text!r}")
    return text


def path_arg(text: str) -> str:
    """A type for a file or directory: an empty path is refused rather than taken as the
    default one."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r}")
    return text


# -- shared options --------------------------------------------------------------------


def add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        type=path_arg,
        metavar="STORE",
        help="result store: a file (SQLite) or a postgresql:// URL (default: "
        "$ACCELBENCH_STORE, else results.sqlite in the user data directory)",
    )


def add_report(parser: argparse.ArgumentParser) -> None:
    """--report FILE and --no-report, for the commands that measure (run, validate)."""
    parser.add_argument("--report", type=path_arg, metavar="FILE",
                        help="where to write the HTML report, or Markdown if FILE ends in .md "
                        "(default: reports/RUN.html beside the store)")
    parser.add_argument("--no-report", action="store_true", help="do not write a report file")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def add_exclude_contended(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--exclude-contended", action="store_true",
                        help="leave out figures measured while the host was busy with other "
                        "work (they are marked 'contended' otherwise)")


def add_judge_anyway(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge-contended", action="store_true",
                        help="call figures measured while the host was busy or the device "
                        "throttled faster or slower too (they are inconclusive otherwise)")


def add_exclude_throttled(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--exclude-throttled", action="store_true",
                        help="leave out figures measured while the device throttled (power, "
                        "thermal or clock capping; they are marked 'throttled' otherwise)")


def add_ranks(parser: argparse.ArgumentParser) -> None:
    """The options of commands that start ranks with torchrun, beside --nproc-per-node."""
    from accelbench.core.names import BACKENDS

    parser.add_argument("--oversubscribe", action="store_true",
                        help="start more CPU ranks than this node has cores or memory for "
                        "(refused otherwise)")
    parser.add_argument("--backend", choices=BACKENDS,
                        help="torch.distributed backend (default: nccl on GPUs — RCCL on "
                        "ROCm — and gloo on the CPU)")


def add_telemetry(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--telemetry-interval", type=positive_seconds, metavar="S",
                        help="read power, energy, clocks and throttle reasons of the device "
                        "and the host every S seconds beside each case (default 0.05)")
    parser.add_argument("--no-telemetry", action="store_true",
                        help="read no telemetry beside the cases")
    parser.add_argument("--telemetry-source", nargs="+", type=names_arg, metavar="NAME",
                        help="only these telemetry sources: amdsmi, amd-smi, nvml, host "
                        "(default: all that this machine has)")


def telemetry_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The timing settings of --telemetry-interval, --no-telemetry and --telemetry-source;
    an unknown source name is a usage error."""
    from accelbench.env.telemetry import SOURCE_NAMES

    settings: dict[str, Any] = {}
    if args.no_telemetry:
        if args.telemetry_interval is not None or args.telemetry_source:
            raise UserError("--no-telemetry leaves nothing for --telemetry-interval or "
                            "--telemetry-source to set")
        settings["telemetry_interval"] = 0.0
    elif args.telemetry_interval is not None:
        settings["telemetry_interval"] = args.telemetry_interval
    sources = split_list(args.telemetry_source)
    unknown = [s for s in sources if s not in SOURCE_NAMES]
    if unknown:
        raise UserError(f"unknown telemetry source {unknown[0]!r} (sources: "
                        f"{', '.join(SOURCE_NAMES)})")
    if sources:
        settings["telemetry_sources"] = sources
    return settings


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        type=name_arg,
        default="auto",
        help="auto (first accelerator, else the CPU), cpu, cuda or cuda:N "
        "(ROCm GPUs are 'cuda' devices in PyTorch)",
    )


def store_location(args: argparse.Namespace) -> StoreLocation:
    """The StoreLocation of --store (else $ACCELBENCH_STORE, else the default file); a
    URL of a scheme accelbench cannot store into is a usage error."""
    from accelbench.store import default_store_location, parse_location

    return parse_location(args.store) if args.store else default_store_location()


def open_store(args: argparse.Namespace, create: bool) -> Store:
    from accelbench.store import Store

    return Store.open(store_location(args), create=create)


def print_json(data: Any) -> None:
    """`data` as strict JSON on stdout: a number that is not finite as null, noted beside
    (core.strict_json)."""
    from accelbench.core.strict_json import dump

    dump(data, sys.stdout)


def split_list(values: list[str] | None) -> tuple[str, ...]:
    """`--dtype fp16,bf16 fp32` -> ("fp16", "bf16", "fp32")."""
    out: list[str] = []
    for value in values or ():
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return tuple(dict.fromkeys(out))


def check_percent(value: float | None, option: str, allow_zero: bool = True) -> None:
    if value is None:
        return
    if not (0 <= value < 100) or (value == 0 and not allow_zero):
        raise UserError(f"{option} must be a percentage {'from' if allow_zero else 'above'} 0 "
                        "and below 100")


def parse_overrides(items: Sequence[str] | None) -> dict[str, tuple[str, ...]]:
    """Each `-p NAME=TEXT` as written, gathered by name (repeating -p adds values); how
    TEXT splits into values is the parameter's to say (runner.plan.given_values)."""
    out: dict[str, tuple[str, ...]] = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise UserError(f"--param expects NAME=VALUE[,VALUE], got {item!r}")
        out[name.strip()] = (*out.get(name.strip(), ()), text.strip())
    return out


def env_pairs(items: Sequence[str] | None, option: str) -> tuple[tuple[str, str], ...]:
    """`--x-env NAME=VALUE` given again and again, as (name, value) pairs, the last of a
    name winning; a UserError for one that is not NAME=VALUE."""
    from accelbench.errors import UserError

    values: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier() or not name.isascii():
            raise UserError(f"{option} {item!r}: expected NAME=VALUE")
        values[name] = value
    return tuple(values.items())

"""`accelbench` entry point: parse, dispatch, and turn UserError into one line."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from accelbench.cli import (
    ab_cmd,
    baseline_cmd,
    compare_cmd,
    diagnose_cmd,
    env_cmd,
    explain_cmd,
    export_cmd,
    generations_cmd,
    history_cmd,
    list_cmd,
    merge_cmd,
    profile_cmd,
    publish_cmd,
    report_cmd,
    run_cmd,
    runs_cmd,
    show_cmd,
    slurm_cmd,
    tune_cmd,
    validate_cmd,
)
from accelbench.core.family import Command
from accelbench.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    Terminated,
    UserError,
)
from accelbench.report.text import printable
from accelbench.version import __version__

DEBUG_ENV = "ACCELBENCH_DEBUG"  # set: an unexpected error shows its traceback

# accelbench's own commands, in the order `accelbench --help` lists them; the families'
# own commands follow (core.family.Family.commands).
COMMANDS: tuple[Command, ...] = (
    run_cmd, validate_cmd, list_cmd, env_cmd, runs_cmd, show_cmd, report_cmd, publish_cmd,
    export_cmd, profile_cmd, compare_cmd, ab_cmd, generations_cmd, history_cmd, diagnose_cmd,
    baseline_cmd, merge_cmd, slurm_cmd, tune_cmd, explain_cmd)


def commands() -> tuple[Command, ...]:
    """Every command: accelbench's own, then each family's."""
    from accelbench.benchmarks import REGISTRY

    return (*COMMANDS, *REGISTRY.commands())


def _needed(argv: list[str] | None) -> tuple[Command, ...]:
    """The commands the parser of `argv` needs: one of accelbench's own needs only itself
    (a command's options may list what the families declare, which imports them all);
    anything else, every command."""
    words = sys.argv[1:] if argv is None else argv
    named = [c for c in COMMANDS if words and words[0] == c.NAME]
    return tuple(named) or commands()


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is a UserError like any other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message}")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        # argparse takes `--opt=--` as no value at all and stores [] without calling the
        # option's type: refuse it as the type would have refused '--'.
        for action in self._actions:
            if (isinstance(action, argparse._StoreAction) and action.nargs is None
                    and getattr(parsed, action.dest, None) == []):
                self.error(f"argument {'/'.join(action.option_strings)}: expected a value, "
                           "got '--'")
        return parsed, extras


def build_parser(available: tuple[Command, ...] | None = None) -> Parser:
    """The parser of `available` commands (default: every command)."""
    parser = Parser(
        prog="accelbench",
        description="Validate and benchmark a PyTorch accelerator stack (ROCm, CUDA, CPU) "
        "and keep every result with the stack it ran on.",
    )
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in available if available is not None else commands():
        p = sub.add_parser(command.NAME, help=command.HELP, description=command.HELP)
        command.add_arguments(p)
        p.set_defaults(handler=command.run)
    return parser


def entry() -> NoReturn:
    """The `accelbench` command (and `python -m accelbench`): `main`, then exit with its
    code; a rank of a torchrun job exits without the interpreter's teardown, its work done
    (runner.lifeline.exit_rank)."""
    code = main()
    from accelbench.runner.distributed import launched_by_torchrun

    if launched_by_torchrun():
        from accelbench.runner.lifeline import exit_rank

        exit_rank(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    _keep_standard_streams()
    parser = build_parser(_needed(argv))
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "handler", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        from accelbench.runner.lifeline import terminate_as_interrupt

        with terminate_as_interrupt():
            return int(args.handler(args))
    except UserError as exc:
        # Messages quote what was given or stored: one line, no control characters.
        print(f"accelbench: error: {printable(exc)}", file=sys.stderr)
        return exc.exit_code
    except Terminated:
        print("accelbench: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("accelbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`accelbench env --json | head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush stays quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        # A defect of ours, or a store written by something other than accelbench that
        # holds what no reader expects: one line all the same, and its own exit code.
        if os.environ.get(DEBUG_ENV):
            raise
        from accelbench.core.untrusted import clip

        print(f"accelbench: error: unexpected {type(exc).__name__}: {printable(clip(exc))} "
              f"({DEBUG_ENV}=1 shows where)", file=sys.stderr)
        return EXIT_INTERNAL


def _keep_standard_streams() -> None:
    """Put /dev/null where stdin, stdout or stderr is closed (`accelbench runs >&-`) or
    cannot be written (`1</dev/null`).

    Output that nobody can read is dropped quietly, as for a reader that went away,
    instead of failing the command; and no file the command opens (the store, a trace)
    can take the free descriptor and receive what a worker process it starts prints.
    """
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        if _usable(fd, writing=fd != 0):
            continue
        devnull = os.open(os.devnull, flags)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
    # Python leaves these None when the descriptor was closed at start-up.
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    # A path or name that is not UTF-8 (Python holds its bytes as lone surrogates) is
    # printed with those bytes escaped, never fails the command after its work is done.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "") == "strict":
            reconfigure(errors="backslashreplace")


def _usable(fd: int, writing: bool) -> bool:
    try:
        if writing:
            os.write(fd, b"")  # writes nothing; fails on a closed or read-only descriptor
        else:
            os.fstat(fd)
    except OSError:
        return False
    return True

"""`accelbench env`: the fingerprint of the stack on this machine."""

from __future__ import annotations

import argparse

from accelbench.cli.options import add_device, add_json, print_json

NAME = "env"
HELP = "show the stack fingerprint: device, architecture, driver, runtime, libraries, host"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from accelbench.core.device import parse_device_spec
    from accelbench.env.fingerprint import collect

    parse_device_spec(args.device)
    fingerprint = collect(args.device)
    data = fingerprint.to_dict()
    _warn_if_unsupported((data.get("torch") or {}).get("version"))
    if args.json:
        print_json({**data, "generation_key": fingerprint.generation_key,
                    "fingerprint_id": fingerprint.fingerprint_id})
        return 0
    from accelbench.report.fingerprint import rows
    from accelbench.report.terminal import console, key_value_table

    table = key_value_table(rows(data), title=f"Stack: {fingerprint.generation_key}")
    console().print(table)
    return 0


def _warn_if_unsupported(version: str | None) -> None:
    """The stack is shown whatever it is; a PyTorch too old to measure on is said."""
    import sys

    from accelbench.env.torch_floor import unsupported_torch

    reason = unsupported_torch(version)
    if reason:
        print(f"accelbench: warning: {reason}", file=sys.stderr)

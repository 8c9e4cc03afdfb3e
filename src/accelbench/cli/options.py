"""Options shared by several commands, defined once."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="result store (default: $ACCELBENCH_STORE, else results.sqlite in the user "
        "data directory)",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def add_exclude_contended(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--exclude-contended", action="store_true",
                        help="leave out figures measured while the host was busy with other "
                        "work (they are marked 'contended' otherwise)")


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        default="auto",
        help="auto (first accelerator, else the CPU), cpu, cuda or cuda:N "
        "(ROCm GPUs are 'cuda' devices in PyTorch)",
    )


def store_path(args: argparse.Namespace) -> Path:
    from accelbench.store import default_store_path

    return Path(args.store).expanduser() if args.store else default_store_path()


def open_store(args: argparse.Namespace, create: bool) -> Any:
    from accelbench.store import Store

    return Store.open(store_path(args), create=create)


class StoreOnFirstUse:
    """Opens the store only when first asked (under torchrun, only rank 0 asks), and
    closes it on exit."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self.store: Any = None

    def __call__(self) -> Any:
        if self.store is None:
            self.store = open_store(self._args, create=True)
        return self.store

    def __enter__(self) -> StoreOnFirstUse:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.store is not None:
            self.store.close()


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def split_list(values: list[str] | None) -> tuple[str, ...]:
    """`--dtype fp16,bf16 fp32` -> ("fp16", "bf16", "fp32")."""
    out: list[str] = []
    for value in values or ():
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return tuple(dict.fromkeys(out))

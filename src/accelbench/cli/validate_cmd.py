"""`accelbench validate`: is this stack correct and complete? Run the validation checks
(the `validate` suite), store each with its verdict, print them failing first; the exit
code is 1 when any check failed."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    add_json,
    add_store,
    store_location,
)
from accelbench.cli.progress import add_quiet
from accelbench.cli.request_options import add_request_file
from accelbench.cli.validate_request import add_validate_options, validate_request

if TYPE_CHECKING:
    from accelbench.core.request import RunRequest

NAME = "validate"
HELP = ("check that this node and stack are healthy and compute correctly: the node's "
        "health, numerics per precision, mixed precision, determinism, compile and export, "
        "torchvision/torchaudio/torchtext/torchrec, collectives, device memory, and with "
        "--level or --burn the copy matrix and a burn-in; exit 1 if a check fails")
DETERMINISM = "determinism"
# cuBLAS reads its workspace setting once per process: the deterministic one is set
# before the workers start (PyTorch's reproducibility notes ask for it).
CUBLAS_CONFIG = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_validate_options(parser)
    add_request_file(parser, NAME)
    add_store(parser)
    add_json(parser)
    add_quiet(parser)


def build_request(args: argparse.Namespace) -> RunRequest:
    from accelbench.benchmarks import REGISTRY

    return validate_request(args, REGISTRY)


def run(args: argparse.Namespace) -> int:
    from accelbench.app import prepare
    from accelbench.app import run as run_request
    from accelbench.cli.printing import print_checks
    from accelbench.cli.progress import progress_listener
    from accelbench.cli.request_options import given_or_read

    # Bad names and values fail here, before anything starts or the store is opened.
    request = given_or_read(args, build_request, add_arguments)
    valid = prepare(request)
    if DETERMINISM in request.benches:
        os.environ.setdefault(*CUBLAS_CONFIG)
    finished = run_request(request, store_location(args), progress_listener(args),
                           argv=sys.argv[1:], valid=valid)
    if finished is None:
        return 0  # a rank other than 0: rank 0 prints
    return print_checks(finished, args.json, "Validation")

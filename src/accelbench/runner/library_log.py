"""What the libraries say while a case runs, kept in the case's record, not on stderr.

PyTorch, torchao, transformers and the engines warn about deprecations and fallbacks
through Python's `warnings` and through their loggers (torch's prints `W1203 ...
_pytree.py:630] ...` on stderr). Every worker process imports them afresh, so the same
lines would be printed once per process of every case, among the results. While a case
runs they are captured instead, each distinct line once, and stored with the case
(`details["library_warnings"]`), where a reader of that case finds them.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

MAX_KEPT = 50  # distinct lines kept per case
MAX_LENGTH = 500  # characters kept of one line
OWN = "accelbench"  # this package's own loggers print as they would


@contextlib.contextmanager
def library_warnings() -> Iterator[list[str]]:
    """Capture the warnings, and the records of WARNING and above of every logger but
    accelbench's, emitted inside the block; yields the list of distinct lines, filled as
    they come.

    Records are taken where a logger hands them to its handlers (`Logger.callHandlers`),
    not by replacing handlers: a library configures its loggers when it is first
    imported, which is often inside a case (torch reinstalls its stderr handler then),
    and that configuration stays as the library made it."""
    lines: list[str] = []
    original = logging.Logger.callHandlers

    def kept(logger: logging.Logger, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING or record.name.split(".")[0] == OWN:
            original(logger, record)
            return
        try:
            _keep(lines, f"{record.name}: {record.getMessage()}")
        except Exception:  # a record that cannot be formatted is not worth a failure
            original(logger, record)

    logging.Logger.callHandlers = kept  # type: ignore[method-assign,assignment]
    try:
        # The filters in force stay (tests turn warnings into errors); what they would
        # show is kept instead.
        with warnings.catch_warnings(record=True) as caught:
            yield lines
        for w in caught:
            _keep(lines, f"{w.category.__name__}: {w.message}")
    finally:
        logging.Logger.callHandlers = original  # type: ignore[method-assign]


def _keep(lines: list[str], line: str) -> None:
    line = " ".join(line.split())[:MAX_LENGTH]
    if line not in lines and len(lines) < MAX_KEPT:
        lines.append(line)

"""What the libraries say while a case runs, kept in the case's record, not on stderr.

PyTorch, torchao, transformers and the engines warn about deprecations and fallbacks
through Python's `warnings` and through their own loggers (torch's prints `W1203 ...
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

# The loggers of the libraries the cases use that print on their own (their handlers do
# not hand records to the root logger); the root logger catches the others.
LIBRARY_LOGGERS = ("torch", "torchao", "transformers", "diffusers", "onnxruntime")
MAX_KEPT = 50  # distinct lines kept per case
MAX_LENGTH = 500  # characters kept of one line


class _Kept(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.WARNING)
        self._lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _keep(self._lines, f"{record.name}: {record.getMessage()}")
        except Exception:  # a record that cannot be formatted is not worth a failure
            self.handleError(record)


@contextlib.contextmanager
def library_warnings() -> Iterator[list[str]]:
    """Capture the warnings and WARNING records that libraries emit inside the block;
    yields the list of distinct lines, filled as they come."""
    lines: list[str] = []
    handler = _Kept(lines)
    saved = []
    for name in ("", *LIBRARY_LOGGERS):
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate))
        logger.handlers = [handler]
        logger.propagate = False
    try:
        # The filters in force stay (tests turn warnings into errors); what they would
        # show is kept instead.
        with warnings.catch_warnings(record=True) as caught:
            yield lines
        for w in caught:
            _keep(lines, f"{w.category.__name__}: {w.message}")
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers = handlers
            logger.propagate = propagate


def _keep(lines: list[str], line: str) -> None:
    line = " ".join(line.split())[:MAX_LENGTH]
    if line not in lines and len(lines) < MAX_KEPT:
        lines.append(line)

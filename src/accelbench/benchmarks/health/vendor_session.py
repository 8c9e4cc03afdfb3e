"""A vendor library opened for one read of every GPU and closed after it, whatever the
read did: the part the amdsmi and NVML readers share."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from accelbench.env.bindings import quietly
from accelbench.env.telemetry.guard import Importer, SourceUnavailable, load_binding, vendor_errors

Raw = dict[str, Any]
Errors = tuple[type[BaseException], ...]
Read = tuple[str, list[Raw], str | None]  # (source, one reading per GPU, why none)


def read_with(source: str, name: str, module: str, error: str, init: str, shutdown: str,
              importer: Importer, read_all: Callable[[Any, Errors], Read]) -> Read:
    """Load `module` (the library `name`), call its `init`, `read_all(lib, errors)`, then
    its `shutdown`; a library that is missing or does not start is the reason no GPU was
    read. `errors` are the binding's own error class (`error`) and the generic binding
    errors."""
    try:
        lib = load_binding(module, importer)
    except SourceUnavailable as exc:
        return source, [], str(exc)
    errors = vendor_errors(lib, error)
    try:
        quietly(getattr(lib, init))
    except errors as exc:
        return source, [], f"{name} did not start: {line(exc)}"
    try:
        return read_all(lib, errors)
    finally:
        with contextlib.suppress(*errors):
            getattr(lib, shutdown)()


def line(exc: BaseException) -> str:
    """An error's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__

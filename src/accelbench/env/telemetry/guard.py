"""Calling into vendor bindings so that a failing call costs one channel, not the case.

The bindings raise their own error classes (NVMLError, AmdSmiException) for "not
supported" and friends, AttributeError where a binding is older than the call, TypeError
or ValueError where it is newer and returns another shape, and KeyError for a missing dict
field. Those make that one reading None. Anything else (OSError from a vanished driver,
RuntimeError) is not expected of a healthy library, so it propagates and the sampler ends
that source with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from accelbench.env.bindings import BindingUnavailable, Importer, load_binding

# A source cannot be opened; the message says why, for `Series.missing`. A binding that
# is absent or does not load (env.bindings) is one such reason: the one class for both.
SourceUnavailable = BindingUnavailable

__all__ = ["Guard", "Importer", "SourceUnavailable", "load_binding", "number",
           "vendor_errors"]

T = TypeVar("T")

_BINDING_ERRORS: tuple[type[BaseException], ...] = (
    AttributeError, TypeError, ValueError, KeyError, IndexError,
)  # fmt: skip

# amdsmi and some drivers report "no value" as the all-ones value of the field's width.
_SENTINELS = {0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF}


def vendor_errors(module: Any, *names: str) -> tuple[type[BaseException], ...]:
    """The binding's own error classes that exist, with the generic binding errors."""
    found = [getattr(module, name, None) for name in names]
    own = tuple(e for e in found if isinstance(e, type) and issubclass(e, BaseException))
    return own + _BINDING_ERRORS


class Guard:
    """Calls that turn expected binding errors into None, remembering the first one, so a
    read in which every call failed can say why."""

    def __init__(self, errors: tuple[type[BaseException], ...]) -> None:
        self.errors = errors
        self.first_error: BaseException | None = None

    def call(self, fn: Callable[..., T], *args: object) -> T | None:
        try:
            return fn(*args)
        except self.errors as exc:
            if self.first_error is None:
                self.first_error = exc
            return None

    def settle(self, reading: dict[str, float | None], answered_before: bool) -> bool:
        """Whether the reading answered at all. When every call of a device that answered
        before fails, the device is gone (a lost GPU, a driver reset): the first error is
        raised, so the sampler ends the source with it rather than sampling nothing."""
        if any(value is not None for value in reading.values()):
            return True
        if answered_before and self.first_error is not None:
            raise self.first_error
        return answered_before


def number(value: object) -> float | None:
    """A finite reading, or None for "N/A", sentinels, booleans and the like."""
    if isinstance(value, dict) and "value" in value:  # amd-smi CLI: {"value": 1, "unit": "W"}
        value = value["value"]
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and value in _SENTINELS:
        return None
    result = float(value)
    return result if math.isfinite(result) else None


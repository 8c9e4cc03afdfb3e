"""Reading one value of a stored record as the type it was written with, tolerantly.

A stored record may have been written by an older accelbench, by another tool, or edited
by hand: each reader here gives None where the value is missing or of another kind,
never raises, and the typed details of a family (`from_details`) are read with them. A
bool is never taken for a number: JSON's true is not 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["finite", "finites", "integer", "integers", "mapping", "number", "strings", "text"]


def integer(value: object) -> int | None:
    """An int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number(value: object) -> float | None:
    """An int or a float (not a bool) as a float, else None; inf and nan are kept."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def finite(value: object) -> float | None:
    """A finite number as a float, else None."""
    found = number(value)
    return found if found is not None and math.isfinite(found) else None


def text(value: object) -> str | None:
    """A str, else None."""
    return value if isinstance(value, str) else None


def mapping(value: object) -> Mapping[str, object] | None:
    """A mapping (a JSON object), else None."""
    return value if isinstance(value, Mapping) else None


def strings(value: object) -> tuple[str, ...] | None:
    """A list (or tuple) with each item as text (str() of it), else None."""
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else None


def finites(value: object) -> tuple[float, ...] | None:
    """A list (or tuple) of finite numbers as floats; None where it is not a list or any
    item is not a finite number."""
    if not isinstance(value, (list, tuple)):
        return None
    found = tuple(finite(v) for v in value)
    return None if any(v is None for v in found) else tuple(v for v in found if v is not None)


def integers(value: object) -> tuple[int, ...] | None:
    """A list (or tuple) of ints; None where it is not a list or any item is not an int."""
    if not isinstance(value, (list, tuple)):
        return None
    found = tuple(integer(v) for v in value)
    return None if any(v is None for v in found) else tuple(v for v in found if v is not None)

"""Message sizes in the form operators know from nccl-tests and rccl-tests.

A size is a number of bytes with an optional binary suffix (`64`, `1K`, `256M`, `1G`;
`K` is 1024 as in nccl-tests' `-b`/`-e`). A sweep is `MIN:MAX:xF` (multiply by F, like
`-f F`) or `MIN:MAX:+S` (add S, like `-i S`); `MIN:MAX` alone doubles. Like nccl-tests,
the sweep stops at the last size not above MAX.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from accelbench.core.params import Param
from accelbench.errors import UserError

MAX_SWEEP_SIZES = 1000  # a guard against `1:1G:+1`
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """`"64K"` -> 65536; plain integers pass through."""
    if isinstance(text, bool):
        raise UserError(f"not a size: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise UserError(f"a size cannot be negative: {text}")
        return text
    match = _SIZE.match(str(text))
    if not match:
        raise UserError(f"not a size: {text!r} (bytes, optionally with K, M, G or T)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def sweep_sizes(
    min_bytes: int, max_bytes: int, factor: int | None = None, step: int | None = None
) -> tuple[int, ...]:
    """Sizes from min_bytes up to max_bytes, multiplied by `factor` or increased by `step`."""
    if (factor is None) == (step is None):
        raise UserError("a sweep takes either a factor or a step")
    if min_bytes < 0 or max_bytes < min_bytes:
        raise UserError(f"a sweep needs 0 <= min <= max, got {min_bytes}..{max_bytes}")
    if factor is not None and factor < 2:
        raise UserError(f"a sweep factor must be at least 2, got {factor}")
    if factor is not None and min_bytes == 0:
        raise UserError("a multiplying sweep cannot start at 0 bytes")
    if step is not None and step < 1:
        raise UserError(f"a sweep step must be at least 1, got {step}")
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        if len(sizes) > MAX_SWEEP_SIZES:
            raise UserError(f"the sweep {min_bytes}..{max_bytes} has more than "
                            f"{MAX_SWEEP_SIZES} sizes; use a larger factor or step")
        size = size * factor if factor is not None else size + (step or 0)
    return tuple(sizes)


def parse_sizes(value: str | int) -> tuple[int, ...]:
    """One size (`"1M"`) or a sweep (`"8:1G:x2"`, `"1K:64K:+8K"`, `"8:1M"`) as sizes."""
    if not isinstance(value, str) or ":" not in value:
        return (parse_size(value),)
    parts = [p.strip() for p in value.split(":")]
    if len(parts) not in (2, 3) or not all(parts):
        raise UserError(f"not a sweep: {value!r} (MIN:MAX:xFACTOR or MIN:MAX:+STEP)")
    low, high = parse_size(parts[0]), parse_size(parts[1])
    how = parts[2] if len(parts) == 3 else "x2"
    if how[:1] in ("x", "X", "*"):
        try:
            factor = int(how[1:])
        except ValueError:
            raise UserError(f"not a sweep factor: {how!r} in {value!r}") from None
        return sweep_sizes(low, high, factor=factor)
    if how[:1] == "+":
        return sweep_sizes(low, high, step=parse_size(how[1:]))
    raise UserError(f"a sweep ends in xFACTOR or +STEP, got {how!r} in {value!r}")


@dataclass(frozen=True)
class SizeParam(Param):
    """An int parameter of bytes that also takes suffixes (`1M`) and sweeps (`8:1G:x2`).

    The planner calls `expand` on each value given on the command line or in a suite,
    so one sweep becomes one case per size; each size is then parsed as an int.
    """

    def expand(self, value: Any) -> tuple[int, ...]:
        return parse_sizes(value)

    def parse(self, value: Any, benchmark: str = "") -> Any:
        if isinstance(value, str) and ":" not in value:
            value = parse_size(value)
        return super().parse(value, benchmark)


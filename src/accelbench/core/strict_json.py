"""JSON as accelbench writes it for other programs (`--json`, `export`): strict JSON, which
any parser reads.

Python's json writes a float that is not finite as `NaN` or `Infinity`, which is not JSON:
strict parsers (and `accelbench merge`) refuse the whole document. A damaged store can
hold such numbers (samples that are NaN), and figures derived from odd samples (zero or
negative times) can be NaN. Each is written as null instead, and the nearest object
says what it was under "not_finite": its path within that object and the value
("NaN", "Infinity", "-Infinity"):

    {"samples": [null, 0.001], "not_finite": {"samples[0]": "NaN"}}
"""

from __future__ import annotations

import json
import math
from typing import IO, Any

NOT_FINITE = "not_finite"


def finite(data: Any) -> Any:
    """`data` with every float that is not finite replaced by None, and noted (above)."""
    if isinstance(data, dict):
        notes: dict[str, str] = {}
        out = {key: _value(value, str(key), notes) for key, value in data.items()}
        if notes:
            out[NOT_FINITE] = {**_notes(out.get(NOT_FINITE)), **notes}
        return out
    if isinstance(data, (list, tuple)):
        return [finite(item) for item in data]
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


def dumps(data: Any, indent: int | None = 2) -> str:
    """`data` as strict JSON (anything else JSON has no type for as its str)."""
    return json.dumps(finite(data), indent=indent, default=str, allow_nan=False)


def dump(data: Any, out: IO[str], indent: int | None = 2) -> None:
    out.write(dumps(data, indent))
    out.write("\n")


def _value(value: Any, path: str, notes: dict[str, str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        notes[path] = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
        return None
    if isinstance(value, (list, tuple)):
        return [_value(item, f"{path}[{i}]", notes) for i, item in enumerate(value)]
    return finite(value)


def _notes(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}

"""What a baseline file must be before `diagnose` uses it: a JSON Schema (Draft 2020-12,
with the "finite" keyword of `store.record_schema`) of the file `accelbench baseline`
writes (`baseline.Baseline.to_dict`).

A baseline file is untrusted, and a value that parses can still switch a rule off: a
figure of "nan", 0 or -1 makes every ratio to it meaningless (and `diagnose` skips
such a check), and `"higher_is_better": "no"` is true to Python. So every value is
checked for what it is: figure values finite numbers above 0, spreads and coefficients
of variation finite and not negative, percentages of the peak finite or null, booleans
true or false, text text, parameters a mapping of names to scalars. The first problem
is one line naming the JSON path of the value (`base.json: cases[2].figures[0].value:
'nan' is not a finite number above 0`), a UserError (the usage exit code).
"""

from __future__ import annotations

from typing import Any

from accelbench.core.untrusted import short
from accelbench.errors import UserError
from accelbench.store.record_schema import describe_error, json_path, validator

# "x-expect" (not a JSON Schema keyword, so validation ignores it) says in words what a
# value must be: any failure of that value is "<value> is not <x-expect>".
_POSITIVE = {"type": "number", "finite": True, "exclusiveMinimum": 0,
             "x-expect": "a finite number above 0"}
_NOT_NEGATIVE = {"type": "number", "finite": True, "minimum": 0,
                 "x-expect": "a finite number of at least 0"}
_NOT_NEGATIVE_OR_NULL = {"type": ["number", "null"], "finite": True, "minimum": 0,
                         "x-expect": "a finite number of at least 0, or null"}
_FINITE_OR_NULL = {"type": ["number", "null"], "finite": True,
                   "x-expect": "a finite number or null"}
_BOOLEAN = {"type": "boolean", "x-expect": "true or false"}
_TEXT = {"type": "string", "x-expect": "a string"}
_TEXTS = {"type": "array", "items": _TEXT, "x-expect": "a list of strings"}
_SCALAR = {"type": ["string", "number", "boolean", "null"],
           "x-expect": "a string, a number, true, false or null"}

_FIGURE = {
    "type": "object",
    "required": ["name", "unit", "higher_is_better", "value"],
    "properties": {
        "name": _TEXT, "unit": _TEXT, "higher_is_better": _BOOLEAN, "value": _POSITIVE,
        "spread": _NOT_NEGATIVE, "pct_of_peak": _FINITE_OR_NULL,
    },
    "additionalProperties": False,
}

_CASE = {
    "type": "object",
    "required": ["key", "label", "benchmark", "version", "family", "params", "figures"],
    "properties": {
        "key": _TEXT, "label": _TEXT, "benchmark": _TEXT, "version": _TEXT, "family": _TEXT,
        "check": {"type": "boolean"},
        "params": {"type": "object", "additionalProperties": _SCALAR,
                   "x-expect": "a mapping of parameter names to values"},
        "nodes": {"type": "integer", "minimum": 1, "x-expect": "a whole number of at least 1"},
        "outliers": _TEXTS,
        "cv": _NOT_NEGATIVE_OR_NULL,
        "primary": _TEXT,
        "figures": {"type": "array", "items": _FIGURE, "x-expect": "a list of figures"},
    },
    "additionalProperties": False,
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "accelbench baseline file",
    "type": "object",
    "required": ["format", "format_version", "cases"],
    "properties": {
        # Checked, and the file upgraded to the current version, before this schema.
        "format": _TEXT,
        "format_version": {"type": "integer"},
        "created_at": {"type": "number", "finite": True, "x-expect": "a finite number"},
        "source": _TEXT,
        "generation_keys": _TEXTS,
        "runs": _TEXTS,
        "hosts": _TEXTS,
        "cases": {"type": "array", "items": _CASE, "x-expect": "a list of cases"},
    },
    "additionalProperties": False,
}


def validate_baseline(data: Any, source: str) -> None:
    """Raise a one-line UserError at the first value of `data` that SCHEMA refuses."""
    error = next(iter(validator(SCHEMA).iter_errors(data)), None)
    if error is None:
        return
    path = json_path(error.absolute_path)
    expect = error.schema.get("x-expect") if isinstance(error.schema, dict) else None
    if expect and error.validator not in ("required", "additionalProperties"):
        message = f"{short(error.instance)} is not {expect}"
    else:
        message = describe_error(error)
    raise UserError(f"{source}: {path}: {message}")

"""What an import must be before anything of it is written: the JSON Schema of a results
export, and the checks that every stored run read elsewhere passes before `merge` copies it.

An export, or a store given to `merge`, is untrusted: a measurement that is a list,
samples that are text or a start time that is a word would be stored as they are and
break `show`, `report` and `runs` for the whole store. So, before any write:

  1. an export is checked against SCHEMA (JSON Schema, Draft 2020-12): the export of
     `store.export.export_json`, with each measurement a record as
     `Measurement.to_dict` writes it (format 3, or 2 from before telemetry;
     `export_dict` adds "figures", "interval", "contended", "energy" and "throttled",
     which are not read back), or a format 1 record as
     `measurement._upgrade_1` reads it. "finite": true (a keyword of this schema) asks
     for a number that is neither NaN nor infinite;
  2. every run, from an export or from another store, is checked in the form it would be
     written (`check_runs`): the same schema on its run record and its measurements'
     `to_dict()`, and a run id of the safe form (RUN_ID).

Then `report.readable.check_readable` computes, once, everything the read commands
derive from a run, so that a run `merge` accepts can be read by every command.

The first problem found is one line, a StoreError (the store's exit code), with the JSON
path of the value: `export.json: runs[0].measurements[3].timings[0].samples[1]: 'abc' is
not of type 'number'`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from accelbench.core.names import RUN_STATUSES, STATUSES
from accelbench.core.untrusted import check_shape, clip, short
from accelbench.errors import StoreError

# The run ids the store writes are "20261130-002249-3fa2"; an import may bring any id of
# this conservative form, which is safe in a file name and never "..".
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

_FINITE = {"type": "number", "finite": True}
_NUMBER_OR_NULL = {"type": ["number", "null"], "finite": True}
_TEXT = {"type": "string"}
_TEXTS = {"type": "array", "items": _TEXT}
_PARAM = {"type": ["string", "number", "boolean", "null"], "finite": True}

_CASE = {
    "type": "object",
    "required": ["benchmark", "version", "family", "params", "device"],
    "properties": {
        "benchmark": _TEXT, "version": _TEXT, "family": _TEXT, "device": _TEXT,
        "params": {"type": "object", "additionalProperties": _PARAM},
        "key": _TEXT, "shown": _TEXTS, "check": {"type": "boolean"},
    },
    "additionalProperties": False,
}

# Measurement.to_dict()'s "measured" figures (Figure.to_dict); a format 1 figure kept as
# measured may have no number (null).
_FIGURE = {
    "type": "object",
    "required": ["name", "value", "unit"],
    "properties": {
        "name": _TEXT, "value": _NUMBER_OR_NULL, "unit": _TEXT,
        "higher_is_better": {"type": "boolean"}, "peak": _NUMBER_OR_NULL,
        "pct_of_peak": _NUMBER_OR_NULL, "low": _NUMBER_OR_NULL, "high": _NUMBER_OR_NULL,
        "contended": {"type": "boolean"},  # export_dict's figures only
    },
    "additionalProperties": False,
}

_TIMING = {
    "type": "object",
    "required": ["samples", "number"],
    "properties": {
        "samples": {"type": "array", "items": _FINITE},
        "number": {"type": "integer", "minimum": 1},
        "warmup_calls": {"type": "integer", "minimum": 0},
        "stop_reason": _TEXT,
        "settled": {"type": "boolean"},
    },
    "additionalProperties": False,
}

_RATE = {
    "type": "object",
    "required": ["name", "amount", "unit"],
    "properties": {
        "name": _TEXT, "amount": _FINITE, "unit": _TEXT, "peak": _NUMBER_OR_NULL,
        "over": {"enum": ["median", "mean"]},
    },
    "additionalProperties": False,
}

_HOST = {
    "type": "object",
    "properties": {"contended": {"type": "boolean"}, "reasons": _TEXTS},
}

# What a record of either format has in common.
_COMMON = {
    "case": _CASE,
    "status": {"enum": list(STATUSES)},
    "reason": {"type": ["string", "null"]},
    "warnings": _TEXTS,
    "details": {"type": "object"},
    "started_at": _FINITE,
    "duration_s": _FINITE,
    "confidence": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
}

RECORD_2 = {
    "type": "object",
    "required": ["format_version", "case", "status"],
    "properties": {
        **_COMMON,
        "format_version": {"const": 2},
        "timings": {"type": "array", "items": _TIMING},
        "rates": {"type": "array", "items": _RATE},
        "time_name": _TEXT,
        "measured": {"type": "array", "items": _FIGURE},
        "hosts": {"type": "array", "items": _HOST},
        # Written by Measurement.export_dict for other tools; not read back.
        "figures": {"type": "array", "items": _FIGURE},
        "interval": {"type": ["object", "null"]},
        "contended": {"type": "boolean"},
    },
    "additionalProperties": False,
}

# core.telemetry.Series.to_dict(), one per process (format 3 records).
_SERIES = {
    "type": "object",
    "required": ["format_version", "interval_s"],
    "properties": {
        "format_version": {"type": "integer", "minimum": 1},
        "interval_s": {"type": "number", "finite": True, "exclusiveMinimum": 0},
        "t": {"type": "array", "items": _FINITE},
        "channels": {"type": "object",
                     "additionalProperties": {"type": "array", "items": _NUMBER_OR_NULL}},
        "sources": _TEXTS,
        "missing": {"type": "object", "additionalProperties": _TEXT},
        "stopped": {"type": ["string", "null"]},
        "wrap_j": {"type": "object", "additionalProperties": _FINITE},
        "throttle_names": {"type": "object", "propertyNames": {"pattern": "^[0-9]{1,3}$"},
                           "additionalProperties": _TEXT},
        "window": {"type": "array", "items": _FINITE, "minItems": 2, "maxItems": 2},
        # Series format 2: the devices sharing each package-wide channel.
        "shared_by": {"type": "object", "additionalProperties": _TEXTS},
    },
    "additionalProperties": False,
}

RECORD_3: dict[str, Any] = {
    **RECORD_2,
    "properties": {
        **RECORD_2["properties"],  # type: ignore[dict-item]
        "format_version": {"const": 3},
        "telemetry": {"type": "array", "items": _SERIES},
        # Written by Measurement.export_dict for other tools; not read back.
        "energy": {"type": ["object", "null"]},
        "throttled": {"type": "boolean"},
    },
}

# Format 1, as _upgrade_1 reads it: samples and derived figures stored.
RECORD_1 = {
    "type": "object",
    "required": ["case", "status"],
    "properties": {
        **_COMMON,
        "format_version": {"const": 1},
        "samples": {"type": "array", "items": _FINITE},
        "number": {"type": ["integer", "null"], "minimum": 0},
        "figures": {"type": "array", "items": _FIGURE},
        "details": {
            "type": "object",
            "properties": {"stop_reason": _TEXT, "warmup_calls": {"type": "integer",
                                                                   "minimum": 0}},
        },
        "hosts": {"type": "array", "items": _HOST},
    },
    "additionalProperties": False,
}

# A record of a version newer than this accelbench reads is left to the format check,
# whose message says to upgrade.
_RECORD = {
    "type": "object",
    "if": {"required": ["format_version"], "properties": {"format_version": {"const": 3}}},
    "then": {"$ref": "#/$defs/record3"},
    "else": {
        "if": {"required": ["format_version"],
               "properties": {"format_version": {"const": 2}}},
        "then": {"$ref": "#/$defs/record2"},
        "else": {
            "if": {"required": ["format_version"],
                   "properties": {"format_version": {"type": "integer", "minimum": 4}}},
            "else": {"$ref": "#/$defs/record1"},
        },
    },
}

# The fingerprint is read leniently (keys come and go with its history), but the nodes of
# a distributed job are read by `show` and the reports: env.cluster's dict form.
_CLUSTER = {
    "type": "object",
    "required": ["node_count", "node_names", "ranks_per_node"],
    "properties": {
        "node_count": {"type": "integer", "minimum": 1},
        "node_names": _TEXTS,
        "ranks_per_node": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "node_ranks": {"type": "array",
                       "items": {"type": "array", "items": {"type": "integer", "minimum": 0}}},
        "interconnect": {"type": "array",
                         "items": {"type": "object", "additionalProperties": _TEXT}},
    },
    "additionalProperties": False,
}
_FINGERPRINT = {"type": "object", "properties": {"cluster": _CLUSTER}}

RUN = {
    "type": "object",
    "required": ["id", "started_at", "status", "device", "generation_key", "fingerprint_id"],
    "properties": {
        "id": {"type": "string", "pattern": f"^{RUN_ID.pattern}$", "not": {"pattern": r"\.\."}},
        "started_at": _FINITE,
        "finished_at": {"type": ["number", "null"], "finite": True},
        "status": {"enum": list(RUN_STATUSES)},
        "suite": {"type": ["string", "null"]},
        "argv": _TEXTS,
        "device": _TEXT,
        "generation_key": _TEXT,
        "host": _TEXT,
        "accelbench_version": _TEXT,
        "fingerprint_id": _TEXT,
        # Counted again from the measurements on import.
        "n_ok": {"type": "integer"}, "n_failed": {"type": "integer"},
        "n_skipped": {"type": "integer"},
        # Export format 3: each `accelbench run --resume` of the run (ResumeEvent).
        "resumes": {"type": "array", "items": {
            "type": "object",
            "required": ["resumed_at", "fingerprint_id", "status_before"],
            "properties": {"resumed_at": _FINITE, "fingerprint_id": _TEXT,
                           "status_before": {"enum": list(RUN_STATUSES)}},
            "additionalProperties": False,
        }},
        # Export format 4: what the run was asked for (core.request.RunRequest's JSON
        # form, checked in full by RunRequest.from_dict on load).
        "request": {"type": ["object", "null"]},
    },
    "additionalProperties": False,
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "accelbench results export",
    "type": "object",
    "required": ["format", "format_version", "runs"],
    "properties": {
        "format": {"const": "accelbench-results"},
        "format_version": {"type": "integer", "minimum": 1},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["run", "fingerprint", "measurements"],
                "properties": {
                    "run": {"$ref": "#/$defs/run"},
                    "fingerprint": {"$ref": "#/$defs/fingerprint"},
                    "measurements": {"type": "array", "items": {"$ref": "#/$defs/record"}},
                    # Export format 3: the earlier measurements of cases a resume
                    # measured again.
                    "superseded": {"type": "array", "items": {"$ref": "#/$defs/record"}},
                },
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
    "$defs": {"run": RUN, "fingerprint": _FINGERPRINT, "record": _RECORD,
              "record1": RECORD_1, "record2": RECORD_2, "record3": RECORD_3},
}


def validate_export(data: Any, source: str) -> None:
    """Raise a one-line StoreError at the first place `data` is not an export SCHEMA
    allows."""
    _validate(data, SCHEMA, source)


def check_runs(runs: Iterable[Any], source: str) -> None:
    """Raise a one-line StoreError unless every run (a StoredRun) can be stored as it is
    and read back by every command: see the module docstring."""
    for index, run in enumerate(runs):
        where = f"{source}: run {short(run.record.id)}"
        data = {"run": run.record.to_dict(), "fingerprint": run.fingerprint,
                "measurements": [m.to_dict() for m in run.measurements]}
        if run.superseded:
            data["superseded"] = [m.to_dict() for m in run.superseded]
        check_shape(data, where, StoreError)
        _validate(data, _DOCUMENT_RUN, source, ["runs", index])
        if not RUN_ID.fullmatch(run.record.id):  # the schema's "$" also takes a final "\n"
            raise StoreError(f"{source}: {json_path(['runs', index, 'run', 'id'])}: "
                             f"{short(run.record.id)} is not of the form {RUN_ID.pattern}")


# One run entry of an export, for check_runs.
_DOCUMENT_RUN = {
    "$schema": SCHEMA["$schema"],
    **SCHEMA["properties"]["runs"]["items"],
    "$defs": SCHEMA["$defs"],
}


def _validate(data: Any, schema: dict[str, Any], source: str,
              prefix: Sequence[str | int] = ()) -> None:
    """The first error of `data` against `schema`, as one line with its JSON path
    (`prefix` is the path of `data` in its document)."""
    error = next(iter(validator(schema).iter_errors(data)), None)
    if error is not None:
        path = json_path([*prefix, *error.absolute_path])
        raise StoreError(f"{source}: {path}: {describe_error(error)}")


def validator(schema: dict[str, Any]) -> Any:
    """A Draft 2020-12 validator of `schema` that knows the "finite" keyword."""
    return _validator_class()(schema)


@functools.cache
def _validator_class() -> Any:
    """Made once, when first needed: the import of jsonschema is not cheap."""
    import jsonschema
    from jsonschema import ValidationError

    def finite(validator: Any, wanted: bool, instance: Any, schema: Any) -> Any:
        if wanted and isinstance(instance, (int, float)) and not isinstance(instance, bool):
            try:
                ok = math.isfinite(float(instance))
            except OverflowError:  # an integer beyond any float
                ok = False
            if not ok:
                yield ValidationError(f"{short(instance)} is not a finite number")

    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        jsonschema.Draft202012Validator, {"finite": finite})


def json_path(parts: Sequence[Any] | Iterable[Any]) -> str:
    """`["runs", 0, "id"]` -> "runs[0].id"; the whole document is "(top level)"."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = str(part)
            name = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else short(name)
            out += f".{name}" if out else name
    return out or "(top level)"


def describe_error(error: Any) -> str:
    """The error in words, quoting the value shortened (jsonschema's own message quotes
    it whole)."""
    kind, expected, value = error.validator, error.validator_value, short(error.instance)
    if kind == "type":
        names = expected if isinstance(expected, list) else [expected]
        return f"{value} is not of type {', '.join(map(repr, names))}"
    if kind == "enum":
        return f"{value} is not one of {', '.join(map(repr, expected))}"
    if kind == "const":
        return f"{value} is not {expected!r}"
    if kind == "required":
        missing = [k for k in expected if k not in error.instance]
        return f"missing field {short(missing[0]) if missing else '?'}"
    if kind == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"unknown field {short(extra[0]) if extra else '?'}"
    if kind in ("pattern", "not") and isinstance(error.instance, str):
        return f"{value} is not of the form {RUN_ID.pattern} (and no '..')"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"{value} is out of range ({kind} {expected!r})"
    return clip(error.message)

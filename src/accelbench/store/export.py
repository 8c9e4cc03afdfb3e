"""Stored runs as JSON (complete, reloadable) and CSV (one row per figure, for spreadsheets).

Format history of the JSON export (FORMAT_VERSION):
  1: first version: {"format", "format_version", "runs": [{"run", "fingerprint",
     "measurements"}]}; "run" holds the RunRecord fields, "measurements" hold
     Measurement.to_dict() records, which carry their own format_version.
  2: each measurement is Measurement.export_dict(): its raw record (format 2 or newer)
     plus "figures", the figures derived from it with their intervals, for other tools.
     Loading reads the raw record only; nothing else changed, so version 1 loads as is.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Callable, Iterable
from typing import IO, Any

from accelbench.core.formats import upgrade
from accelbench.core.measurement import STATUS_FAILED, STATUS_OK, STATUS_SKIPPED, Measurement
from accelbench.core.untrusted import clip
from accelbench.errors import StoreError
from accelbench.store.sqlite import RunRecord, StoredRun

FORMAT = "accelbench-results"
FORMAT_VERSION = 2

# Upgrades one version older to the next: _UPGRADES[v] turns version v into v + 1.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: lambda data: {**data, "format_version": 2},
}

CSV_COLUMNS = (
    "run_id", "generation_key", "device", "benchmark", "case", "params", "dtype", "status",
    "reason", "figure", "value", "unit", "low", "high", "pct_of_peak", "median_s",
    "ci_low_s", "ci_high_s", "samples", "processes", "contended", "warnings",
)


def export_json(runs: Iterable[StoredRun]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "runs": [
            {
                "run": _run_dict(run.record),
                "fingerprint": run.fingerprint,
                "measurements": [m.export_dict() for m in run.measurements],
            }
            for run in runs
        ],
    }


def load_json(data: Any, source: str = "results export") -> list[StoredRun]:
    """Runs from an export, upgraded from an older format version if needed, checked
    against the export's schema first (`record_schema`): an export is untrusted, and
    `source` names it in messages."""
    from accelbench.store.record_schema import validate_export

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StoreError(f"{source}: not an accelbench results export "
                         "(no \"format\": \"accelbench-results\")")
    data = upgrade(data, source, FORMAT_VERSION, _UPGRADES)
    validate_export(data, source)
    try:
        return [_stored_run(entry) for entry in data["runs"]]
    except KeyError as e:
        raise StoreError(f"{source}: malformed results export: missing field "
                         f"{clip(repr(e))}") from None
    except (TypeError, ValueError, AttributeError, OverflowError, RecursionError) as e:
        raise StoreError(f"{source}: cannot load results export: {clip(e)}") from None


def write_csv(runs: Iterable[StoredRun], fileobj: IO[str]) -> None:
    """One row per figure of each measurement; one row with empty figure columns for a
    measurement without figures (failed, skipped). `samples` is the number of samples,
    `processes` of the worker processes they came from; `median_s` and its interval are the
    time per call the figures derive from. Text that a spreadsheet would run as a formula
    (a cell starting with =, +, -, @) is written with a leading apostrophe."""
    writer = csv.writer(fileobj)
    writer.writerow(CSV_COLUMNS)
    for run in runs:
        for m in run.measurements:
            case = m.case
            spread = m.spread
            common = [
                run.record.id, run.record.generation_key, case.device, case.benchmark,
                case.label, json.dumps(case.param_dict, default=str), case.dtype, m.status,
                m.reason,
            ]
            tail = [
                spread.center if spread else None,
                spread.low if spread else None,
                spread.high if spread else None,
                len(m.samples),
                len(m.timings),
                "yes" if m.contended else "no",
                "; ".join(m.warnings),
            ]
            figures = [[f.name, f.value, f.unit, f.low, f.high, f.pct_of_peak]
                       for f in m.figures]
            for figure in figures or [[None] * 6]:
                writer.writerow(["" if v is None else _csv_cell(v)
                                 for v in [*common, *figure, *tail]])


# A cell starting with one of these is run as a formula by spreadsheets (OWASP's list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def _csv_cell(value: Any) -> Any:
    """A value for a CSV cell that a spreadsheet shows and never evaluates: text that
    starts like a formula gets a leading apostrophe, the mark spreadsheets read as "this
    is text". Numbers (a negative value is a number, not a formula) pass as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _run_dict(record: RunRecord) -> dict[str, Any]:
    d = dataclasses.asdict(record)
    d["argv"] = list(record.argv)
    return d


def _stored_run(entry: dict[str, Any]) -> StoredRun:
    measurements = tuple(Measurement.from_dict(m) for m in entry["measurements"])
    run = entry["run"]

    def count(status: str) -> int:
        return sum(m.status == status for m in measurements)

    record = RunRecord(
        id=run["id"],
        started_at=run["started_at"],
        finished_at=run.get("finished_at"),
        status=run["status"],
        suite=run.get("suite"),
        argv=tuple(run.get("argv", ())),
        device=run["device"],
        generation_key=run["generation_key"],
        host=run.get("host", ""),
        accelbench_version=run.get("accelbench_version", ""),
        fingerprint_id=run["fingerprint_id"],
        n_ok=count(STATUS_OK),
        n_failed=count(STATUS_FAILED),
        n_skipped=count(STATUS_SKIPPED),
    )
    return StoredRun(record, dict(entry["fingerprint"]), measurements)

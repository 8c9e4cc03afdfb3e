"""Stored runs as JSON: complete and reloadable. (The CSV table of the figures, a
presentation for spreadsheets, is `report.csv_table`.)

Format history of the JSON export (FORMAT_VERSION):
  1: first version: {"format", "format_version", "runs": [{"run", "fingerprint",
     "measurements"}]}; "run" holds the RunRecord fields, "measurements" hold
     Measurement.to_dict() records, which carry their own format_version.
  2: each measurement is Measurement.export_dict(): its raw record (format 2 or newer)
     plus "figures", the figures derived from it with their intervals, for other tools.
     Loading reads the raw record only; nothing else changed, so version 1 loads as is.
  3: a run may have been resumed (`accelbench run --resume`): its "run" may hold
     "resumes" (ResumeEvent.to_dict(), oldest first), and its entry "superseded": the
     earlier measurements of the cases a resume measured again, kept beside the newest
     ("measurements" holds the newest of each case). Both are left out of a run never
     resumed, so version 2 loads as is.
  4: a run's "run" may hold "request": what it was asked for (core.request.RunRequest's
     JSON form, with its own format). A run without one gets it from its "argv" on load,
     as the store's migration gives it to runs stored before (core.request_argv), so
     version 3 loads as is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from accelbench.core.formats import upgrade
from accelbench.core.measurement import STATUS_FAILED, STATUS_OK, STATUS_SKIPPED, Measurement
from accelbench.core.request import RequestError, RunRequest
from accelbench.core.request_argv import request_from_argv
from accelbench.core.strict_json import NOT_FINITE
from accelbench.core.untrusted import clip
from accelbench.errors import StoreError
from accelbench.store.records import ResumeEvent, RunRecord, StoredRun

FORMAT = "accelbench-results"
FORMAT_VERSION = 4

# Upgrades one version older to the next: _UPGRADES[v] turns version v into v + 1.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: lambda data: {**data, "format_version": 2},
    2: lambda data: {**data, "format_version": 3},
    3: lambda data: _with_requests(data),
}


def _with_requests(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 to 4: each run of `accelbench run` gets its request from its command line,
    as the store's migration gives it to runs stored before requests were."""
    runs = data.get("runs")
    if isinstance(runs, list):
        runs = [_run_with_request(entry) for entry in runs]
    return {**data, "format_version": 4, "runs": runs}


def _run_with_request(entry: Any) -> Any:
    run = entry.get("run") if isinstance(entry, dict) else None
    if not isinstance(run, dict) or "request" in run:
        return entry
    argv = run.get("argv")
    request = request_from_argv(argv) if isinstance(argv, list) else None
    if request is None:
        return entry
    return {**entry, "run": {**run, "request": request.to_dict()}}


def export_json(runs: Iterable[StoredRun]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "runs": [_entry(run) for run in runs],
    }


def _entry(run: StoredRun) -> dict[str, Any]:
    entry = {
        "run": run.record.to_dict(),
        "fingerprint": run.fingerprint,
        "measurements": [m.export_dict() for m in run.measurements],
    }
    if run.superseded:
        entry["superseded"] = [m.export_dict() for m in run.superseded]
    return entry


def load_json(data: Any, source: str = "results export") -> list[StoredRun]:
    """Runs from an export, upgraded from an older format version if needed, checked
    against the export's schema first (`record_schema`): an export is untrusted, and
    `source` names it in messages."""
    from accelbench.store.record_schema import validate_export

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StoreError(f"{source}: not an accelbench results export "
                         "(no \"format\": \"accelbench-results\")")
    data = upgrade(data, source, FORMAT_VERSION, _UPGRADES)
    data = _without_not_finite(data)
    validate_export(data, source)
    try:
        return [_stored_run(entry) for entry in data["runs"]]
    except KeyError as e:
        raise StoreError(f"{source}: malformed results export: missing field "
                         f"{clip(repr(e))}") from None
    except (TypeError, ValueError, AttributeError, OverflowError, RecursionError) as e:
        raise StoreError(f"{source}: cannot load results export: {clip(e)}") from None


def _without_not_finite(data: Any) -> Any:
    """An export with the numbers that were not finite where it was written (nulls that
    core.strict_json notes under "not_finite") made loadable: such a sample, which no
    figure can come from, is left out, and its measurement says so in a warning; the
    notes go. Any other null stays, for the schema to judge."""
    if isinstance(data, list):
        return [_without_not_finite(item) for item in data]
    if not isinstance(data, dict):
        return data
    out = {k: _without_not_finite(v) for k, v in data.items() if k != NOT_FINITE}
    timings = out.get("timings")
    if isinstance(timings, list) and isinstance(data.get("timings"), list):
        kept, dropped, notes = [], 0, []
        for raw, timing in zip(data["timings"], timings, strict=True):
            noted = raw.get(NOT_FINITE) if isinstance(raw, dict) else None
            samples = timing.get("samples") if isinstance(timing, dict) else None
            if not isinstance(noted, dict) or not isinstance(samples, list):
                kept.append(timing)
                continue
            gone = {i for i, v in enumerate(samples)
                    if v is None and f"samples[{i}]" in noted}
            notes += [str(noted[f"samples[{i}]"]) for i in sorted(gone)]
            dropped += len(gone)
            left = [v for i, v in enumerate(samples) if i not in gone]
            if left or not gone:
                kept.append({**timing, "samples": left})
        if dropped:
            out["timings"] = kept
            warnings = out.get("warnings")
            out["warnings"] = [*(warnings if isinstance(warnings, list) else ()),
                               f"{dropped} sample(s) were not finite numbers where this was "
                               f"exported from ({', '.join(dict.fromkeys(notes))}): left out"]
    return out


def _request(run: dict[str, Any]) -> dict[str, Any] | None:
    """A run's request, checked as any request handed in (a bad one refuses the export)."""
    if run.get("request") is None:
        return None
    try:
        RunRequest.from_dict(run["request"], f"run {run['id']}: request")
    except RequestError as exc:
        raise StoreError(f"malformed results export: {exc}") from None
    return dict(run["request"])


def _stored_run(entry: dict[str, Any]) -> StoredRun:
    superseded = [Measurement.from_dict(m) for m in entry.get("superseded", ())]
    measurements = [Measurement.from_dict(m) for m in entry["measurements"]]
    run = entry["run"]
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
        n_ok=0,
        n_failed=0,
        n_skipped=0,
        resumes=tuple(ResumeEvent(e["resumed_at"], e["fingerprint_id"], e["status_before"])
                      for e in run.get("resumes", ())),
        request=_request(run),
    )
    # As the store reads a run: the last measurement of each case is its result (a case
    # that "measurements" holds twice, in an export written by hand, included).
    stored = StoredRun.of_rows(record, dict(entry["fingerprint"]), [*superseded, *measurements])

    def count(status: str) -> int:
        return sum(m.status == status for m in stored.measurements)

    counted = dataclasses.replace(record, n_ok=count(STATUS_OK), n_failed=count(STATUS_FAILED),
                                  n_skipped=count(STATUS_SKIPPED))
    return dataclasses.replace(stored, record=counted)

"""The result store: every run, its stack fingerprint and its raw measurements, in SQLite
(the embedded default) or PostgreSQL (a store shared by a fleet).

`Store` writes and reads the store, whichever back-end holds it; `location` parses what
`--store` names; `export` turns stored runs into JSON and loads JSON exports back (the
CSV table is a report: `report.csv_table`).
"""

from accelbench.store.export import export_json, load_json
from accelbench.store.location import StoreLocation, default_store_location, parse_location
from accelbench.store.records import RunRecord, StoredExplanation, StoredProfile, StoredRun
from accelbench.store.store import (
    RUN_COMPLETE,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_RUNNING,
    RUN_STATUSES,
    Store,
    default_store_path,
)

__all__ = [
    "RUN_COMPLETE",
    "RUN_FAILED",
    "RUN_INTERRUPTED",
    "RUN_RUNNING",
    "RUN_STATUSES",
    "RunRecord",
    "Store",
    "StoreLocation",
    "StoredExplanation",
    "StoredProfile",
    "StoredRun",
    "default_store_location",
    "default_store_path",
    "export_json",
    "load_json",
    "parse_location",
]

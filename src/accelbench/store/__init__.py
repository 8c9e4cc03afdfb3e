"""The result store: every run, its stack fingerprint and its raw measurements, in SQLite.

`Store` writes and reads the store; `export` turns stored runs into JSON and loads JSON
exports back (the CSV table is a report: `report.csv_table`).
"""

from accelbench.store.export import export_json, load_json
from accelbench.store.sqlite import (
    RUN_COMPLETE,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_RUNNING,
    RUN_STATUSES,
    RunRecord,
    Store,
    StoredRun,
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
    "StoredRun",
    "default_store_path",
    "export_json",
    "load_json",
]

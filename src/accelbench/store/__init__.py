"""The result store: every run, its stack fingerprint and its raw measurements, in SQLite.

`Store` writes and reads the store; `export` turns stored runs into JSON or CSV and
loads JSON exports back.
"""

from accelbench.store.export import export_json, load_json, write_csv
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
    "write_csv",
]

"""Whether every command can present a run: checked before `merge` stores one from
elsewhere.

A run that passes the record format's schema (`store.record_schema`) may still hold what
no reader expects: a fingerprint whose memory size is a word, a collective whose message
size is null. Stored, it would break `show`, `report` or `runs` for the whole store. So
`check_readable` derives, once, what the read commands derive: every measurement's
figures, intervals and table row, the fingerprint's rows (`show --env`), the run's
sections as every report builds them (each family's tables and the data of its charts,
which only the HTML report draws, a large part of a second each) in the Markdown report,
and the JSON export.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from accelbench.core.untrusted import clip
from accelbench.errors import StoreError

if TYPE_CHECKING:
    from accelbench.store import StoredRun


def check_readable(run: StoredRun, where: str) -> None:
    """Raise a one-line StoreError, naming what failed, unless every read command can
    present `run` (a StoredRun)."""
    from accelbench.core.units import format_timestamp
    from accelbench.report.fingerprint import rows as fingerprint_rows
    from accelbench.report.markdown import run_report
    from accelbench.report.results import rows
    from accelbench.store.export import export_json

    record = run.record
    step = "its record"
    try:
        format_timestamp(record.started_at, seconds=True)
        if record.finished_at is not None:
            format_timestamp(record.finished_at, seconds=True)
        for index, m in enumerate(run.measurements):
            step = f"measurement {index}"
            _ = (m.case.key, m.case.label, m.samples, m.number, m.stop_reason, m.stats,
                 m.spread, m.figures, m.primary, m.value_samples(), m.noisy, m.contended,
                 m.contention, [f.pct_of_peak for f in m.figures], m.export_dict())
            rows([m])
        step = "its fingerprint"
        fingerprint_rows(run.fingerprint)
        step = "its report"
        run_report(record, run.fingerprint, run.measurements)
        step = "its export"
        json.dumps(export_json([run]), default=str)
    except Exception as exc:  # any failure here means a command could not read the run
        raise StoreError(f"{where}: {step} cannot be read: {type(exc).__name__}: "
                         f"{clip(exc)}") from None

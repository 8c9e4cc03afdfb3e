"""What the gate checks add to a run's report: each subject's figure beside its gate,
with the verdict, the reason code of a failure, and where the gate comes from."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.benchmarks.health.findings import FAIL, PASS
from accelbench.benchmarks.health.view import findings_of
from accelbench.core.measurement import Measurement
from accelbench.core.names import STATUS_SKIPPED
from accelbench.core.view import BAD, GOOD, WARN, Section, Table

TITLE = "Gates"
ABOUT = ("Each figure measured on every subject (a GPU, a pair of GPUs, the node) beside "
         "the gate of this GPU model, shipped with accelbench (`docs/gates.md`) or given "
         "in a site file: a subject on the wrong side of its gate fails its check with the "
         "reason code shown. A model with no gates is not judged, and says so.")


def gates_table(measurements: Sequence[Measurement]) -> Table | None:
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for m in measurements:
        figure = str(m.case.param_dict.get("figure", ""))
        if m.status == STATUS_SKIPPED:
            rows.append((figure, "", "", "", "skipped", "", m.reason or ""))
            styles.append(WARN)
            continue
        for f in findings_of(m):
            value = f.reading.get("value")
            threshold = f.reading.get("threshold")
            unit = str(f.reading.get("unit") or "")
            side = "≤" if "≤" in f.rule.split(" (")[0] else "≥"
            rows.append((figure, f.subject, _num(value, unit), f"{side} {_num(threshold, unit)}",
                         f.level, f.code or "", str(f.reading.get("basis") or f.rule)))
            styles.append(GOOD if f.level == PASS else BAD if f.level == FAIL else WARN)
        if m.reason and not findings_of(m):
            rows.append((figure, "", "", "", "failed", "", m.reason))
            styles.append(BAD)
    if not rows:
        return None
    return Table("Figures against their gates",
                 ("Figure", "Subject", "Measured", "Gate", "Verdict", "Code", "Basis"),
                 rows, styles=styles)


def _num(value: object, unit: str) -> str:
    return f"{value:.4g} {unit}" if isinstance(value, (int, float)) else ""


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    table = gates_table(measurements)
    return [Section("gates", TITLE, (table,), ABOUT, first=True)] if table else []

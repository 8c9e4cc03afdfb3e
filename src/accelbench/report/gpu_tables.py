"""Each GPU's history (`accelbench diagnose --by-gpu`) as tables: the GPUs, where they have
been and what changed, then every change point found, worst first."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.analysis.gpu_history import GpuHistory, gpu_name, where
from accelbench.core.units import format_change, format_timestamp
from accelbench.core.view import BAD, GOOD, WARN, Table


def gpu_history_tables(histories: Sequence[GpuHistory]) -> list[Table]:
    return [gpus_table(histories), change_points_table(histories)]


def gpus_table(histories: Sequence[GpuHistory]) -> Table:
    rows = []
    styles: list[str | None] = []
    for h in histories:
        g = h.gpu
        stays = "; ".join(f"{s.host} {format_timestamp(s.first_seen)[:10]} to "
                          f"{format_timestamp(s.last_seen)[:10]} ({s.runs} runs)"
                          for s in g.stays)
        falls = sum(1 for f in h.findings if f.change.change < 0)
        rows.append((gpu_name(g), g.product or "-", g.host, stays, str(len(h.series)),
                     str(falls), "regressed" if h.regressed else "ok"))
        styles.append(BAD if h.regressed else WARN if h.findings else GOOD)
    regressed = [gpu_name(h.gpu) for h in histories if h.regressed]
    notes = [f"{len(regressed)} of {len(histories)} GPUs end on a regression: "
             + ", ".join(regressed) if regressed else
             f"no GPU of {len(histories)} ends on a regression"]
    if not histories:
        notes = ["no GPU identities stored: runs record each GPU's serial and UUID from "
                 "this version of accelbench on"]
    notes.append("A GPU is followed by its serial (else its UUID) across the nodes it was "
                 "in; its cases' series are `accelbench history`'s over its runs alone.")
    return Table("GPUs", ("GPU", "Product", "Now in", "Where (first to last run)", "Cases",
                          "Falls", "Result"), rows, notes, frozenset({4, 5}), styles)


def change_points_table(histories: Sequence[GpuHistory]) -> Table:
    findings = sorted((f for h in histories for f in h.findings),
                      key=lambda f: (f.change.change, f.name))
    rows = [(f.name, where(f.gpu), f.series.case.label, f.series.generation_key,
             format_change(f.change.change), format_timestamp(f.change.started_at),
             f.change.run_id, "-" if f.p_value is None else f"{f.p_value:.2g}")
            for f in findings]
    styles: list[str | None] = [BAD if f.change.change < 0 else GOOD for f in findings]
    notes = [f.describe() for f in findings if f.change.change < 0][:20]
    return Table("Change points", ("GPU", "Where", "Case", "Stack", "Change", "From (UTC)",
                                   "Run", "p"), rows, notes, frozenset({4, 7}), styles)

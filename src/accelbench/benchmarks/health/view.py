"""What the health checks add to a run's report: every finding that warns or fails,
with the rule that decided it, a line per check, and the GPU/NIC wiring matrix."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from accelbench.analysis.checks import coded, codes_of, stored_findings, verdict_of
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding
from accelbench.core.measurement import Measurement
from accelbench.core.names import STATUS_OK
from accelbench.core.topology import DirectRecord, TopologyRecord
from accelbench.core.view import BAD, GOOD, Section, Table
from accelbench.core.view import WARN as WARN_STYLE

TITLE = "Node health"
ABOUT = ("Each check reads what the kernel or the GPU's library reports and judges every "
         "reading by the rule shown: a failing finding fails its check, a warning leaves it "
         "passed. A check with nothing to read on this node is skipped with the reason.")
_STYLES = {PASS: GOOD, WARN: WARN_STYLE, FAIL: BAD}
_ORDER = {FAIL: 0, WARN: 1, PASS: 2}
SHOWN_PASSES = 3  # findings a check's line shows when none failed


def findings_of(m: Measurement) -> list[Finding]:
    """The findings a health case stored (none for a skipped one or another family's)."""
    raw = m.details.get("findings") if isinstance(m.details, dict) else None
    if not isinstance(raw, list):
        return []
    out = []
    for item in raw:
        try:
            out.append(Finding.from_dict(item))
        except (KeyError, TypeError, ValueError):
            continue  # a record written by hand or by a newer version: shown without it
    return out


def check_of(m: Measurement) -> str:
    return str(m.case.param_dict.get("check", m.case.benchmark))


def checks_table(measurements: Sequence[Measurement]) -> Table:
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for m in measurements:
        found = findings_of(m)
        counts = {lv: sum(f.level == lv for f in found) for lv in (FAIL, WARN, PASS)}
        verdict = (m.details.get("verdict") if m.status == STATUS_OK else None) or (
            FAIL if found and counts[FAIL] else m.status)
        said = coded(codes_of(m, verdict_of(m), stored_findings(m)), m.reason or "; ".join(
            f.message if len(found) == 1 else f"{f.subject}: {f.message}"
            for f in found[:SHOWN_PASSES]))
        if len(found) > SHOWN_PASSES and not m.reason:
            said += f"; {len(found) - SHOWN_PASSES} more"
        rows.append((check_of(m), str(verdict), str(counts[FAIL]), str(counts[WARN]),
                     str(counts[PASS]), said))
        styles.append(_STYLES.get(str(verdict), WARN_STYLE if m.status != STATUS_OK else None))
    return Table("Health checks", ("Check", "Verdict", "Failed", "Warned", "Passed", "Found"),
                 rows, numeric=frozenset({2, 3, 4}), styles=styles)


def findings_table(measurements: Iterable[Measurement]) -> Table | None:
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for m in measurements:
        for f in sorted(findings_of(m), key=lambda f: _ORDER[f.level]):
            if f.level == PASS:
                continue
            rows.append((check_of(m), f.subject, f.level, f.code or "", f.message, f.rule))
            styles.append(_STYLES[f.level])
    if not rows:
        return None
    return Table("Health findings that warn or fail",
                 ("Check", "Subject", "Level", "Code", "Found", "Rule"), rows, styles=styles)


def topology_table(measurements: Iterable[Measurement]) -> Table | None:
    for m in measurements:
        wiring = TopologyRecord.from_details(m.details)
        if wiring is None or len(wiring.names) < 2:
            continue
        rows = [(name, *row) for name, row in zip(wiring.names, wiring.matrix, strict=False)]
        numa = [f"{d.name}: NUMA node {d.numa_node if d.numa_node is not None else '?'}"
                f" ({d.address})" for d in wiring.devices]
        return Table("GPU and NIC wiring", ("", *wiring.names), rows,
                     ["X itself; PIX one PCIe switch; PXB several bridges; PHB one CPU host "
                      "bridge; NODE across host bridges of one NUMA node; SYS across NUMA "
                      "nodes; NV# joined by # NVLinks (directly or through NVSwitches); XGMI "
                      "one XGMI hop. " + "; ".join(numa), _direct_note(wiring.direct)])
    return None


def _direct_note(direct: DirectRecord | None) -> str:
    """Where the NVLink/XGMI words came from, or why the matrix has none."""
    if direct is None:  # stored before direct links were read
        return "PCI tree only: NVLink/XGMI links were not read."
    if direct.read:
        return f"NVLink/XGMI links read from {direct.source}."
    return f"PCI tree only: NVLink/XGMI links not read ({direct.missing})."


def copy_tables(measurements: Iterable[Measurement]) -> list[Table]:
    """The copy matrix of each copy-matrix case: source by target in GB/s, then the
    paths that are not one pair one way (both ways at once, host links, all at once)."""
    out = []
    for m in measurements:
        paths = m.details.get("paths") if isinstance(m.details, dict) else None
        if not isinstance(paths, list) or not paths:
            continue
        square = [p for p in paths if p.get("kind") in ("host", "d2d")]
        names = list(dict.fromkeys([*(str(p["source"]) for p in square),
                                    *(str(p["target"]) for p in square)]))
        cell = {(str(p["source"]), str(p["target"])): _gbs(p) for p in square}
        if names:
            rows = [(a, *(cell.get((a, b), "") for b in names)) for a in names]
            what = ("CPUs of the row's NUMA node copying in the column's node's memory"
                    if square[0].get("kind") == "host" else "row GPU to column GPU")
            out.append(Table(f"Copy transfer rate, GB/s: {what}", ("From \\ to", *names), rows,
                             [f"{int(square[0]['bytes']) >> 20} MiB per copy; bytes copied "
                              "per second (each is read once and written once)."],
                             numeric=frozenset(range(1, len(names) + 1))))
        others = [p for p in paths if p.get("kind") not in ("host", "d2d")]
        if others:
            out.append(Table("Copy transfer rate over the other paths, GB/s",
                             ("Path", "From", "To", "GB/s", "Memory on"),
                             [(str(p["kind"]), str(p["source"]), str(p["target"]), _gbs(p),
                               str(p.get("placed") or "")) for p in others],
                             numeric=frozenset({3})))
    return out


def _gbs(path: dict[str, Any]) -> str:
    value = path.get("bandwidth")
    return f"{float(value) / 1e9:.1f}" if isinstance(value, (int, float)) else ""


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    if not measurements:
        return []
    tables = [t for t in (checks_table(measurements), findings_table(measurements),
                          topology_table(measurements), *copy_tables(measurements))
              if t is not None]
    return [Section("health", TITLE, tuple(tables), ABOUT, first=True)]

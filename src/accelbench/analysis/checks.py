"""The verdicts of validation checks, read from stored measurements: what `accelbench
validate`, the reports and `diagnose` show of them. Pure functions of the records; no
torch.

A check is a measurement of a case that is one (`Case.check`: its family declares its
cases checks, as validation and health do): status ok is a pass (a health check's
warnings are its reason), failed a fail, skipped a skip. Its figures
`error`, `tolerance` and `margin` (in %) say how close it came
(benchmarks.validation.verdict writes them; a health check has none).

Each check that failed, and each pass with warnings, carries its reason codes
(core.reasons, `codes`): a health check's from its findings that decide it (the failing
ones of a fail, the warning ones of a pass); a check that ran out of time, whose process
died, or that raised, the run's code for that; else its benchmark's own code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from accelbench.core.measurement import Measurement
from accelbench.core.names import STATUS_FAILED, STATUS_OK
from accelbench.core.reasons import BENCH_CODES, BY_CODE, CHECK_ERROR, TIMEOUT, WORKER_LOST
from accelbench.core.units import MISSING, format_number, format_pct, format_value

VALIDATION = "validation"
PASS, FAIL, SKIP = "pass", "fail", "skip"
# Parameters the runner adds to every case, which say nothing about what was checked
# (the backend follows from the device).
_RUNNER_PARAMS = ("threads", "backend")
# Warnings about the host beside a check that times nothing: it was not measured.
_TIMING_WARNINGS = ("contended", "noisy")
# How the runner words a case it stopped at its deadline, and one whose process died
# (runner.supervisor, runner.launcher).
_TIMED_OUT = "timed out after"
_LOST = ("worker stopped answering", "worker process crashed", "worker process exited",
         "ranks exited with code")
_RANK_LOST = re.compile(r"\brank \d+ (was killed by|exited with code)")


@dataclass(frozen=True)
class CheckResult:
    check: str  # the benchmark: numerics, amp, torchvision, ...
    subject: str  # what of it: "op=matmul", "check=nms", "" for a check of one thing
    precision: str | None
    verdict: str  # PASS, FAIL or SKIP
    error: float | None
    tolerance: float | None
    margin: float | None  # in %: how far inside the tolerance
    unit: str
    reason: str  # why it failed or was skipped; a pass's warnings
    label: str  # the case label
    key: str
    family: str = VALIDATION
    # A pass that judged only part of what its check covers (a stress on a device with no
    # telemetry: "load only"), and what it judged and did not; empty for a full verdict.
    scope: str = ""
    judged: tuple[str, ...] = ()
    not_judged: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()  # the reason codes (core.reasons) of a fail or a warning
    # A health check's findings as stored (subject, level, rule, message, code).
    findings: tuple[dict[str, Any], ...] = ()

    @property
    def shown(self) -> str:
        """The verdict as a table shows it: "pass (load only)" for a partial pass."""
        text = SHOWN[self.verdict]
        return f"{text} ({self.scope})" if self.scope and self.verdict == PASS else text

    @property
    def coded_reason(self) -> str:
        """The reason with the check's codes before it: "ACCEL_NUMERICS: error 0.2 ..."."""
        return coded(self.codes, self.reason)

    @property
    def name(self) -> str:
        """The check and its subject: "numerics op=matmul"."""
        return f"{self.check} {self.subject}".strip()

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "subject": self.subject, "precision": self.precision,
                "verdict": self.verdict, "error": self.error, "tolerance": self.tolerance,
                "margin_pct": self.margin, "unit": self.unit, "reason": self.reason or None,
                "case": self.label, "key": self.key, "codes": list(self.codes),
                "findings": [dict(f) for f in self.findings],
                **({"scope": self.scope, "judged": list(self.judged),
                    "not_judged": list(self.not_judged)} if self.scope else {})}


def is_check(m: Measurement) -> bool:
    return m.case.check


def verdict_of(m: Measurement) -> str:
    if m.status == STATUS_OK:
        return PASS
    return FAIL if m.status == STATUS_FAILED else SKIP


def check_result(m: Measurement) -> CheckResult:
    """The verdict of one check's measurement."""
    shown = [(k, v) for k, v in m.case.shown_params if k != "dtype" and k not in _RUNNER_PARAMS]
    subject = " ".join(f"{k}={_plain(v)}" for k, v in shown)
    figures = {f.name: f for f in m.measured}
    error, tolerance, margin = (_value(figures, name) for name in ("error", "tolerance",
                                                                    "margin"))
    unit = figures["error"].unit if "error" in figures else ""
    timed = any(f.unit.endswith("/s") for f in m.measured)
    notes = [w for w in m.warnings if timed or not w.startswith(_TIMING_WARNINGS)]
    reason = m.reason or "; ".join(notes)
    dtype = m.case.dtype
    scope = m.details.get("verdict_scope")
    verdict = verdict_of(m)
    found = stored_findings(m)
    return CheckResult(m.case.benchmark, subject, dtype if isinstance(dtype, str) else None,
                       verdict, error, tolerance, margin, unit, reason, m.case.label,
                       m.case.key, m.case.family, scope if isinstance(scope, str) else "",
                       _names(m.details.get("judged")), _names(m.details.get("not_judged")),
                       codes_of(m, verdict, found), found)


def coded(codes: Iterable[str], text: str) -> str:
    """`text` with the reason `codes` before it, as the tables show a fail or a warning."""
    named = ", ".join(codes)
    return f"{named}: {text}" if named and text else named or text


def stored_findings(m: Measurement) -> tuple[dict[str, Any], ...]:
    """The findings a check stored in its details (a health check's), each as subject,
    level, rule, message and code (None for a code outside the table: stored records are
    not trusted); a record without the fields it needs is left out."""
    raw = m.details.get("findings") if isinstance(m.details, dict) else None
    if not isinstance(raw, list):
        return ()
    out = []
    for item in raw:
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in
                                                 ("subject", "level", "rule", "message")):
            continue
        code = item.get("code")
        out.append({"subject": item["subject"], "level": item["level"], "rule": item["rule"],
                    "message": item["message"],
                    "code": code if isinstance(code, str) and code in BY_CODE else None})
    return tuple(out)


def codes_of(m: Measurement, verdict: str, found: tuple[dict[str, Any], ...] = ()
             ) -> tuple[str, ...]:
    """The reason codes of a check (see the module docstring); none for a skip or a
    clean pass."""
    if verdict == SKIP:
        return ()
    level = "fail" if verdict == FAIL else "warn"
    from_findings = [f["code"] for f in found if f["level"] == level and f["code"]]
    if verdict == PASS:
        return tuple(dict.fromkeys(from_findings))
    reason = m.reason or ""
    codes: list[str] = []
    if _TIMED_OUT in reason:
        codes.append(TIMEOUT)
    elif any(lost in reason for lost in _LOST) or _RANK_LOST.search(reason):
        codes.append(WORKER_LOST)
    codes += from_findings
    events = m.details.get("gpu_events") if isinstance(m.details, dict) else None
    if isinstance(events, list) and any(isinstance(e, dict) and e.get("level") == "fail"
                                        for e in events):
        codes.append("ACCEL_GPU_FAULT")
    if not codes:
        traceback = isinstance(m.details, dict) and "traceback" in m.details
        default = BENCH_CODES.get(m.case.benchmark)
        codes.append(CHECK_ERROR if traceback or default is None else default)
    return tuple(dict.fromkeys(codes))


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def check_results(measurements: Iterable[Measurement]) -> list[CheckResult]:
    """Every check among `measurements`, failing ones first, then in run order."""
    results = [check_result(m) for m in measurements if is_check(m)]
    order = {FAIL: 0, PASS: 1, SKIP: 2}
    return sorted(results, key=lambda r: order[r.verdict])


def failed_checks(measurements: Iterable[Measurement]) -> list[CheckResult]:
    return [r for r in check_results(measurements) if r.verdict == FAIL]


def summary_line(measurements: Iterable[Measurement]) -> str:
    """`37 checks: 33 passed, 0 failed, 4 skipped`."""
    counts = tally(check_results(measurements))
    total = sum(counts.values())
    return (f"{total} checks: {counts[PASS]} passed, {counts[FAIL]} failed, "
            f"{counts[SKIP]} skipped")


def tally(results: Iterable[CheckResult]) -> dict[str, int]:
    out = {PASS: 0, FAIL: 0, SKIP: 0}
    for r in results:
        out[r.verdict] += 1
    return out


@dataclass(frozen=True)
class Matrix:
    """Verdicts per check (rows) and precision (columns); a check without a precision
    has its verdict in the column "-". Rows with a failure come first."""

    rows: list[str]
    precisions: list[str]
    cells: dict[tuple[str, str], str]
    failing: frozenset[str]


NO_PRECISION = "-"
_PRECISION_ORDER = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")


def matrix(results: Iterable[CheckResult]) -> Matrix:
    cells: dict[tuple[str, str], str] = {}
    rows: list[str] = []
    precisions: set[str] = set()
    for r in results:
        precision = r.precision or NO_PRECISION
        precisions.add(precision)
        if r.name not in rows:
            rows.append(r.name)
        # Several cases in one cell (another world size, say): a failure shows.
        previous = cells.get((r.name, precision))
        if previous != FAIL:
            cells[(r.name, precision)] = FAIL if FAIL in (previous, r.verdict) else r.verdict
    failing = frozenset(row for (row, _), v in cells.items() if v == FAIL)
    ordered = sorted(rows, key=lambda row: row not in failing)
    known = [p for p in _PRECISION_ORDER if p in precisions]
    others = sorted(precisions - set(known) - {NO_PRECISION})
    columns = known + others + ([NO_PRECISION] if NO_PRECISION in precisions else [])
    return Matrix(ordered, columns, cells, failing)


def _value(figures: dict[str, Any], name: str) -> float | None:
    figure = figures.get(name)
    if figure is None or not isinstance(figure.value, (int, float)):
        return None
    return float(figure.value) if math.isfinite(figure.value) else None


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


SHOWN = {PASS: "pass", FAIL: "FAIL", SKIP: "skip"}  # a verdict in a table


def format_figure(value: float | None, unit: str) -> str:
    """An error or a tolerance: three significant digits, in its unit."""
    if value is None:
        return MISSING
    if unit.endswith("/s") or unit == "s":
        return format_value(value, unit)
    return f"{format_number(value)} {unit}".strip()


def result_text(m: Measurement) -> str:
    """A check in one cell of a results table: "pass, margin 97.0%"."""
    r = check_result(m)
    text = r.shown
    if r.margin is not None:
        return f"{text}, margin {format_pct(r.margin)}"
    if r.error is not None and r.verdict != SKIP:
        return f"{text}, error {format_figure(r.error, r.unit)}"
    return text

"""What a health check finds: one finding per thing it read (a GPU, a memory controller,
a PCIe device, a link), each with pass, warn or fail and the rule that decided it.

A finding carries the values it was decided on (`reading`), so a stored result shows the
evidence and not only the verdict. A check's verdict is its worst finding's: any fail
fails the case with every failing finding named; warnings leave it passed, with each
warning said beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Figure

PASS, WARN, FAIL = "pass", "warn", "fail"
FORMAT = 1  # of a case's details' "findings"
_ORDER = {PASS: 0, WARN: 1, FAIL: 2}


@dataclass(frozen=True)
class Finding:
    subject: str  # what was read: "gpu0", "mc0", "0000:c1:00.0", "gpu0 xgmi1"
    level: str  # PASS, WARN or FAIL
    rule: str  # the rule, stated: "any uncorrectable ECC error fails"
    message: str  # what was found, in one line
    reading: Mapping[str, Any] = field(default_factory=dict)  # the values decided on
    # The reason code (core.reasons) of a finding that warns or fails; a pass has none,
    # and a finding stored before codes existed reads back with none.
    code: str | None = None

    def __post_init__(self) -> None:
        if self.level not in _ORDER:
            raise ValueError(f"unknown level {self.level!r}")
        if self.level == PASS and self.code is not None:
            object.__setattr__(self, "code", None)

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "level": self.level, "rule": self.rule,
                "message": self.message, "reading": dict(self.reading), "code": self.code}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        code = data.get("code")
        return cls(str(data["subject"]), str(data["level"]), str(data["rule"]),
                   str(data["message"]), dict(data.get("reading") or {}),
                   code if isinstance(code, str) else None)


def worst(findings: Iterable[Finding]) -> str:
    """The level of the worst finding; PASS for none."""
    return max((f.level for f in findings), key=_ORDER.__getitem__, default=PASS)


def judged(subject: str, rule: str, failed: bool, message: str,
           reading: Mapping[str, Any] | None = None, *, code: str,
           warn_only: bool = False) -> Finding:
    """A finding that is FAIL (or WARN with `warn_only`) with reason `code` when
    `failed`, else PASS (with no code)."""
    level = (WARN if warn_only else FAIL) if failed else PASS
    return Finding(subject, level, rule, message, dict(reading or {}), code)


def conclude(findings: Sequence[Finding], details: dict[str, Any],
             unchecked: str | None, extra: Sequence[Figure] = ()) -> CaseResult:
    """The case's result from its findings: failed naming each failing one, passed with
    a warning per warning one, skipped with `unchecked` when there are none. `extra`:
    figures of the check's own, before the counts."""
    if not findings:
        raise CaseSkipped(unchecked or "nothing to check on this node")
    level = worst(findings)
    counts = {lv: sum(f.level == lv for f in findings) for lv in (FAIL, WARN, PASS)}
    figures = (*extra, Figure("failed", float(counts[FAIL]), "findings", higher_is_better=False),
               Figure("warned", float(counts[WARN]), "findings", higher_is_better=False),
               Figure("passed", float(counts[PASS]), "findings"))
    merged = {**details, "findings_format": FORMAT, "verdict": level,
              "findings": [f.to_dict() for f in findings]}
    if unchecked:
        merged["unchecked"] = unchecked
    if level == FAIL:
        raise CaseFailed("; ".join(f"{f.subject}: {f.message}" for f in findings
                                   if f.level == FAIL), figures=figures, details=merged)
    warnings = tuple(f"{f.subject}: {f.message}" for f in findings if f.level == WARN)
    return CaseResult(None, figures=figures, details=merged, time_name="", warnings=warnings)

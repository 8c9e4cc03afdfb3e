"""Immutable result records: what a case produced, with its raw samples.

Format history of `Measurement.to_dict` (FORMAT_VERSION):
  1: first version: case, status, reason, samples (s/call), number, figures, warnings,
     details, started_at, duration_s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from accelbench.core.case import Case
from accelbench.core.stats import Summary, summarize
from accelbench.core.timing import Timing

FORMAT_VERSION = 1

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_SKIPPED)


class CaseSkipped(Exception):
    """Raised by a benchmark when a case does not apply to this device (not a failure)."""


class CaseFailed(Exception):
    """Raised by a benchmark for an expected failure with a clear reason
    (unsupported dtype, wrong result)."""


@dataclass(frozen=True)
class Figure:
    """One number with its unit; `peak` is the published peak in the same unit."""

    name: str
    value: float
    unit: str
    higher_is_better: bool = True
    peak: float | None = None

    @property
    def pct_of_peak(self) -> float | None:
        if self.peak is None or not self.peak or math.isnan(self.value):
            return None
        return 100.0 * self.value / self.peak

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "peak": self.peak,
            "pct_of_peak": self.pct_of_peak,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Figure:
        return cls(d["name"], d["value"], d["unit"], d.get("higher_is_better", True), d.get("peak"))


@dataclass(frozen=True)
class Rate:
    """Work done by one timed call, turned into a throughput figure by the harness."""

    name: str  # "throughput", "bandwidth", ...
    amount: float  # per call, in `unit` without the "/s"
    unit: str  # "FLOP/s", "B/s", "sample/s"
    peak: float | None = None  # published peak, same unit
    # "median": amount over the median time per call, robust to outliers (kernels);
    # "mean": amount over the mean, i.e. total work over total timed time (model training,
    # where a slow step is part of what the user waits for).
    over: str = "median"


@dataclass(frozen=True)
class CaseResult:
    """What a benchmark's measure function returns."""

    timing: Timing
    rates: tuple[Rate, ...] = ()
    figures: tuple[Figure, ...] = ()  # figures not derived from time (e.g. peak memory)
    details: dict[str, Any] = field(default_factory=dict)
    time_name: str = "time"  # name of the per-call time figure ("latency" for launch)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measurement:
    case: Case
    status: str
    reason: str | None = None
    samples: tuple[float, ...] = ()  # seconds per call, one value per sample
    number: int = 0  # calls per sample
    figures: tuple[Figure, ...] = ()
    warnings: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0  # unix time
    duration_s: float = 0.0  # wall time of the whole case, set-up included
    confidence: float = 0.95

    @cached_property
    def stats(self) -> Summary | None:
        return summarize(self.samples, self.confidence) if self.samples else None

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @property
    def noisy(self) -> bool:
        return any(w.startswith("noisy") for w in self.warnings)

    @property
    def primary(self) -> Figure | None:
        """The headline figure: the first rate if any, else the time."""
        return self.figures[0] if self.figures else None

    def figure(self, name: str) -> Figure | None:
        return next((f for f in self.figures if f.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "case": self.case.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "samples": list(self.samples),
            "number": self.number,
            "figures": [f.to_dict() for f in self.figures],
            "warnings": list(self.warnings),
            "details": self.details,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "confidence": self.confidence,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        version = d.get("format_version", 1)
        if version > FORMAT_VERSION:
            raise ValueError(
                f"measurement format {version} is newer than this accelbench reads "
                f"({FORMAT_VERSION})"
            )
        return cls(
            case=Case.from_dict(d["case"]),
            status=d["status"],
            reason=d.get("reason"),
            samples=tuple(d.get("samples", ())),
            number=d.get("number", 0),
            figures=tuple(Figure.from_dict(f) for f in d.get("figures", ())),
            warnings=tuple(d.get("warnings", ())),
            details=dict(d.get("details", {})),
            started_at=d.get("started_at", 0.0),
            duration_s=d.get("duration_s", 0.0),
            confidence=d.get("confidence", 0.95),
        )


def from_result(
    case: Case, result: CaseResult, warnings: tuple[str, ...], started_at: float, duration_s: float
) -> Measurement:
    """Derive figures from a benchmark's raw result: rates over the median time."""
    timing = result.timing
    summary = summarize(timing.samples, timing.confidence)
    per_call = {"median": summary.median, "mean": summary.mean}
    figures = [
        Figure(r.name, r.amount / per_call[r.over] if per_call[r.over] > 0 else math.nan,
               r.unit, True, r.peak)
        for r in result.rates
    ]
    figures.append(Figure(result.time_name, summary.median, "s", higher_is_better=False))
    figures.extend(result.figures)
    return Measurement(
        case=case,
        status=STATUS_OK,
        samples=timing.samples,
        number=timing.number,
        figures=tuple(figures),
        warnings=tuple(result.warnings) + warnings,
        details={**result.details, "stop_reason": timing.stop_reason,
                 "warmup_calls": timing.warmup_calls},
        started_at=started_at,
        duration_s=duration_s,
        confidence=timing.confidence,
    )


def not_measured(
    case: Case, status: str, reason: str, started_at: float, duration_s: float,
    details: dict[str, Any] | None = None,
) -> Measurement:
    return Measurement(
        case=case, status=status, reason=reason, details=details or {},
        started_at=started_at, duration_s=duration_s,
    )

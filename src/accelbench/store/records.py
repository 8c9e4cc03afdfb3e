"""What the store holds, as read back: runs, their records and their profiles."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.core.measurement import Measurement

__all__ = ["ResumeEvent", "RunRecord", "StoredProfile", "StoredRun"]


@dataclass(frozen=True)
class ResumeEvent:
    """One `accelbench run --resume` of a run: when it began, on which stack (always the
    run's own: a resume on another is refused), and the status the run had then."""

    resumed_at: float
    fingerprint_id: str
    status_before: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RunRecord:
    id: str
    started_at: float
    finished_at: float | None
    status: str
    suite: str | None
    argv: tuple[str, ...]
    device: str
    generation_key: str
    host: str
    accelbench_version: str
    fingerprint_id: str
    n_ok: int
    n_failed: int
    n_skipped: int
    resumes: tuple[ResumeEvent, ...] = ()  # oldest first; empty for a run never resumed
    # What the run was asked for: core.request.RunRequest's JSON form, secrets redacted,
    # as stored (read with RunRequest.from_dict, which checks it); None for a run of a
    # command stored before requests were.
    request: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The run's entry of an export (its JSON form); "resumes" and "request" only
        where it has them, so that the entry of an older run is as it always was."""
        d = dataclasses.asdict(self)
        d["argv"] = list(self.argv)
        if self.resumes:
            d["resumes"] = [event.to_dict() for event in self.resumes]
        else:
            del d["resumes"]
        if self.request is None:
            del d["request"]
        else:
            d["request"] = dict(self.request)
        return d


@dataclass(frozen=True)
class StoredRun:
    """A run as read back. A run measures each case once, unless it was resumed: a
    resume measures again the cases that failed or were cut short, and the new
    measurement is the run's result for its case while the earlier one is kept, in
    `superseded`, never overwritten."""

    record: RunRecord
    fingerprint: dict[str, Any]
    # The newest measurement of each case (by case key), in the order they were added.
    measurements: tuple[Measurement, ...]
    # The earlier measurements of cases measured again by a resume, in the order added.
    superseded: tuple[Measurement, ...] = ()

    @classmethod
    def of_rows(cls, record: RunRecord, fingerprint: dict[str, Any],
                rows: Sequence[Measurement]) -> StoredRun:
        """The run of `record` from all of its measurements in the order they were added:
        the last of each case key is its result, the others superseded."""
        last = {m.case.key: i for i, m in enumerate(rows)}
        return cls(record, fingerprint,
                   tuple(m for i, m in enumerate(rows) if last[m.case.key] == i),
                   tuple(m for i, m in enumerate(rows) if last[m.case.key] != i))

    @property
    def rows(self) -> tuple[Measurement, ...]:
        """Every measurement, in an order that `of_rows` reads back as this run: the
        superseded first."""
        return (*self.superseded, *self.measurements)


@dataclass(frozen=True)
class StoredProfile:
    """A profile of one case of a run: its trace files and their analysis (JSON)."""

    id: int
    run_id: str
    case_key: str
    benchmark: str
    label: str
    trace_paths: tuple[str, ...]
    analysis: dict[str, Any]
    created_at: float


@dataclass(frozen=True)
class StoredExplanation:
    """What `accelbench explain` found for one case of two runs (its JSON findings)."""

    id: int
    run_a: str
    run_b: str
    case_key: str
    label: str
    findings: dict[str, Any]
    created_at: float

"""What the store holds, as read back: runs, their records and their profiles."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from accelbench.core.measurement import Measurement

__all__ = ["RunRecord", "StoredProfile", "StoredRun"]


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

    def to_dict(self) -> dict[str, Any]:
        """The run's entry of an export (its JSON form)."""
        d = dataclasses.asdict(self)
        d["argv"] = list(self.argv)
        return d


@dataclass(frozen=True)
class StoredRun:
    record: RunRecord
    fingerprint: dict[str, Any]
    measurements: tuple[Measurement, ...]  # in the order they were added


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

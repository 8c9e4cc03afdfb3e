"""The headline figure of each case, per sample, pooled over the runs of one selection.

A measurement keeps its raw samples in seconds per call and the work of one call, and
derives its figures from them. `value_samples` gives the headline figure of every sample
(`Measurement.value_samples`: work over that sample's time for a rate, the time itself
otherwise), so samples of different runs of the same case can be pooled, whatever their
calls per sample.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.stats import median_ci
from accelbench.store import StoredRun


def value_samples(m: Measurement) -> np.ndarray:
    """The headline figure for each sample of `m` (empty when it has none)."""
    return np.asarray(m.value_samples(), dtype=float)


def speed_ratio(ratio: float, higher_is_better: bool) -> float:
    """A ratio of headline figures turned into "how many times faster" (> 1 is faster)."""
    return ratio if higher_is_better else 1.0 / ratio


@dataclass
class CaseResults:
    """Everything one selection of runs holds about one case (same key)."""

    key: str
    ok: list[tuple[str, Measurement]] = field(default_factory=list)  # (run id, measurement)
    not_ok: list[tuple[str, Measurement]] = field(default_factory=list)
    dropped_versions: set[str] = field(default_factory=set)

    @property
    def case(self) -> Case:
        return (self.ok or self.not_ok)[-1][1].case

    @property
    def version(self) -> str:
        return self.case.version

    @property
    def measured(self) -> bool:
        return bool(self.ok)

    @property
    def figure(self) -> Figure | None:
        return self.ok[-1][1].primary if self.ok else None

    @cached_property
    def values(self) -> np.ndarray:
        parts = [value_samples(m) for _, m in self.ok]
        return np.concatenate(parts) if parts else np.empty(0)

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values.size else math.nan

    @property
    def runs(self) -> list[str]:
        return list(dict.fromkeys(run_id for run_id, _ in self.ok))

    @property
    def noisy(self) -> bool:
        return any(m.noisy for _, m in self.ok)

    @property
    def contended(self) -> bool:
        """Some of the pooled figures were measured while the host was busy."""
        return any(m.contended for _, m in self.ok)

    def median_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        if not self.values.size:
            return math.nan, math.nan
        low, high, _ = median_ci(self.values, confidence)
        return low, high

    @property
    def reasons(self) -> list[str]:
        return [f"{m.status}: {m.reason or '-'}" for _, m in self.not_ok]


def collect(runs: Iterable[StoredRun]) -> dict[str, CaseResults]:
    """Per case key, the measurements of `runs` (oldest run first).

    When the runs measured a case with different benchmark versions, only the newest
    version is kept (the others are named in `dropped_versions`): samples of different
    code are never pooled.
    """
    out: dict[str, CaseResults] = {}
    for run in runs:
        for m in run.measurements:
            entry = out.setdefault(m.case.key, CaseResults(m.case.key))
            (entry.ok if m.ok else entry.not_ok).append((run.record.id, m))
    for entry in out.values():
        newest = entry.version
        for bucket in (entry.ok, entry.not_ok):
            kept = [(r, m) for r, m in bucket if m.case.version == newest]
            entry.dropped_versions.update(m.case.version for r, m in bucket
                                          if m.case.version != newest)
            bucket[:] = kept
    return out


def case_sort_key(case: Case) -> tuple[Any, ...]:
    """Family, benchmark, then parameters with numbers in numeric order (bytes=65536
    before bytes=1048576)."""
    return (case.family, case.benchmark,
            tuple((name, _natural(value)) for name, value in case.params))


def _natural(value: object) -> tuple[int, float, str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def case_mode(case: Case) -> str | None:
    """"train" or "infer" for a model case: its "mode" parameter, else what its benchmark
    is named for (train, train-ddp, infer); None for other cases."""
    mode = case.param_dict.get("mode")
    if mode is not None:
        return str(mode)
    for name in ("train", "infer"):
        if case.benchmark.startswith(name):
            return name
    return None

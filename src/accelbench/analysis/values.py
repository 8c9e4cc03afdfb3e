"""The headline figure of each case, per sample, pooled over the runs of one selection.

A measurement keeps its raw samples in seconds per call and the work of one call, and
derives its figures from them. `value_samples` gives the headline figure of every sample
(`Measurement.value_samples`: work over that sample's time for a rate, the time itself
otherwise), so samples of different runs of the same case can be pooled, whatever their
calls per sample.

A comparison can pool another figure than the headline (`collect(runs, figure=GLOB)`):
the first of a measurement's figures whose name matches. Figures that follow the time
per call are given per sample the same way: a rate or the time itself, and the figures of
energy per call and work per joule, whose energy is read over the whole timed window
(power is sampled far more coarsely than calls are timed), so a sample's share of it
is taken to follow its time. Any other figure (power, peak memory, compile time) is one
value per measurement.
"""

from __future__ import annotations

import fnmatch
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


# The names of the figures derived from telemetry that follow each call's time: the energy
# of one call, and "<rate>_per_joule" for each rate.
ENERGY_PER_CALL = "energy_per_call"
PER_JOULE_SUFFIX = "_per_joule"


def value_ci(m: Measurement) -> tuple[float, float, float]:
    """The headline figure with the 95% CI of its median, on the figure's own scale."""
    values = value_samples(m)
    value = m.primary.value if m.primary else math.nan
    if values.size < 2:
        return value, value, value
    low, high, _ = median_ci(values)
    return value, low, high


def matching_figure(m: Measurement, pattern: str) -> Figure | None:
    """The first of `m`'s figures whose name matches the glob `pattern` (any case)."""
    glob = pattern.lower()
    return next((f for f in m.figures if fnmatch.fnmatchcase(f.name.lower(), glob)), None)


def follows_time(m: Measurement, name: str) -> bool:
    """Whether figure `name` of `m` varies with each sample's time per call."""
    return (name == m.time_name or any(r.name == name for r in m.rates)
            or name == ENERGY_PER_CALL or name.endswith(PER_JOULE_SUFFIX))


def figure_samples(m: Measurement, figure: Figure) -> np.ndarray:
    """Figure `figure` of `m` for each sample when it follows the time per call (scaled
    as `Measurement.value_samples` scales the headline figure, in the direction the
    figure itself says is better), else its one value; empty when it is not finite."""
    if not math.isfinite(figure.value):
        return np.empty(0)
    positive = np.asarray([t for t in m.samples if t > 0], dtype=float)
    if not follows_time(m, figure.name) or not positive.size:
        return np.asarray([figure.value], dtype=float)
    median = float(np.median(positive))
    if figure.higher_is_better:
        return np.asarray(figure.value * median / positive, dtype=float)
    return np.asarray(figure.value * positive / median, dtype=float)


def speed_ratio(ratio: float, higher_is_better: bool) -> float:
    """A ratio of headline figures turned into "how many times faster" (> 1 is faster)."""
    return ratio if higher_is_better else 1.0 / ratio


@dataclass
class CaseResults:
    """Everything one selection of runs holds about one case (same key).

    `figure_pattern` None pools the headline figure of each measurement; a glob pools the
    first figure whose name matches it, of the measurements that have one."""

    key: str
    ok: list[tuple[str, Measurement]] = field(default_factory=list)  # (run id, measurement)
    not_ok: list[tuple[str, Measurement]] = field(default_factory=list)
    dropped_versions: set[str] = field(default_factory=set)
    figure_pattern: str | None = None

    @property
    def case(self) -> Case:
        return (self.ok or self.not_ok)[-1][1].case

    @property
    def version(self) -> str:
        return self.case.version

    @property
    def measured(self) -> bool:
        return bool(self.ok)

    def _figure_of(self, m: Measurement) -> Figure | None:
        if self.figure_pattern is None:
            return m.primary
        return matching_figure(m, self.figure_pattern)

    @property
    def pooled(self) -> list[tuple[str, Measurement]]:
        """The measured ones whose figure is pooled: all of them for the headline, those
        that have a matching figure otherwise."""
        if self.figure_pattern is None:
            return self.ok
        return [(r, m) for r, m in self.ok if self._figure_of(m) is not None]

    @property
    def figure(self) -> Figure | None:
        pooled = self.pooled
        return self._figure_of(pooled[-1][1]) if pooled else None

    @cached_property
    def values(self) -> np.ndarray:
        if self.figure_pattern is None:
            parts = [value_samples(m) for _, m in self.ok]
        else:
            parts = []
            for _, m in self.ok:
                figure = self._figure_of(m)
                if figure is not None:
                    parts.append(figure_samples(m, figure))
        return np.concatenate(parts) if parts else np.empty(0)

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values.size else math.nan

    @property
    def runs(self) -> list[str]:
        return list(dict.fromkeys(run_id for run_id, _ in self.pooled))

    @property
    def noisy(self) -> bool:
        return any(m.noisy for _, m in self.pooled)

    @property
    def contended(self) -> bool:
        """Some of the pooled figures were measured while the host was busy."""
        return any(m.contended for _, m in self.pooled)

    @property
    def throttled(self) -> bool:
        """Some of the pooled figures were measured while the device throttled."""
        return any(m.throttled for _, m in self.pooled)

    @property
    def figure_names(self) -> list[str]:
        """The names of the figures of the newest measurement, to say what there is."""
        return [f.name for f in self.ok[-1][1].figures] if self.ok else []

    def median_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        if not self.values.size:
            return math.nan, math.nan
        low, high, _ = median_ci(self.values, confidence)
        return low, high

    @property
    def reasons(self) -> list[str]:
        return [f"{m.status}: {m.reason or '-'}" for _, m in self.not_ok]


def collect(runs: Iterable[StoredRun], figure: str | None = None) -> dict[str, CaseResults]:
    """Per case key, the measurements of `runs` (oldest run first), pooling the figure
    `figure` (a glob on figure names) or, when None, the headline figure.

    When the runs measured a case with different benchmark versions, only the newest
    version is kept (the others are named in `dropped_versions`): samples of different
    code are never pooled.
    """
    out: dict[str, CaseResults] = {}
    for run in runs:
        for m in run.measurements:
            entry = out.setdefault(m.case.key, CaseResults(m.case.key, figure_pattern=figure))
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
    is named for (train, train-ddp, infer, infer-engine; generate and serve infer); None
    for other cases."""
    mode = case.param_dict.get("mode")
    if mode is not None:
        return str(mode)
    for name in ("train", "infer"):
        if case.benchmark.startswith(name):
            return name
    return "infer" if case.benchmark in ("generate", "serve") else None

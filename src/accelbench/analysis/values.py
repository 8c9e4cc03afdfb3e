"""Each case's figure per worker process, over the runs of one selection.

The unit of evidence across runs is the value one worker process measured, as it is in a
run's own interval (`core.between`): `process_values(m, figure)` gives it for every
process of a measurement. A measurement keeps the raw samples of each process in seconds
per call; a figure that follows the time per call (a rate, the time itself, energy per
call and work per joule) is given per process by scaling the run's figure with that
process's time per call (its median, or its mean for a rate over the mean) against the
run's (their geometric mean), so that the processes' geometric mean is the run's figure
itself.
Any other figure (power, peak memory, compile time) is one value per measurement: its
processes' values were merged into their median when the run was stored.

A comparison can take another figure than the headline (`collect(runs, figure=GLOB)`):
the first of a measurement's figures whose name matches.

The figure a selection shows for a case is the one `accelbench show` shows, with the
same interval, when it holds one run; over several runs, the median of the runs'
figures, with the repeat interval between them (`core.between`).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from accelbench.core.between import geometric_mean
from accelbench.core.case import Case
from accelbench.core.measurement import PER_CALL_NAMES, Figure, Measurement
from accelbench.store import StoredRun


def value_samples(m: Measurement) -> np.ndarray:
    """The headline figure for each raw sample of `m` (empty when it has none): what a
    chart of one run's scatter draws, never the unit of a comparison."""
    return np.asarray(m.value_samples(), dtype=float)


# The names of the figures derived from telemetry that follow each call's time: the energy
# of one call, and "<rate>_per_joule" for each rate.
ENERGY_PER_CALL = "energy_per_call"
PER_JOULE_SUFFIX = "_per_joule"


def value_ci(m: Measurement) -> tuple[float, float, float]:
    """The headline figure with its stated interval, as `accelbench show` prints it."""
    figure = m.primary
    if figure is None:
        return math.nan, math.nan, math.nan
    return figure_interval(figure)


def states_interval(figure: Figure) -> bool:
    """Whether the figure states an interval (a measured figure of one value per process,
    a latency percentile from LoadGen, states none)."""
    return figure.low is not None and figure.high is not None


def figure_interval(figure: Figure) -> tuple[float, float, float]:
    """A figure with its interval, the figure itself at both ends where it states none."""
    low = figure.low if figure.low is not None else figure.value
    high = figure.high if figure.high is not None else figure.value
    return figure.value, min(low, high), max(low, high)


def matching_figure(m: Measurement, pattern: str) -> Figure | None:
    """The first of `m`'s figures whose name matches the glob `pattern` (any case)."""
    glob = pattern.lower()
    return next((f for f in m.figures if fnmatch.fnmatchcase(f.name.lower(), glob)), None)


def follows_time(m: Measurement, name: str) -> bool:
    """Whether figure `name` of `m` varies with each sample's time per call."""
    return (name == m.time_name or any(r.name == name for r in m.rates)
            or name == ENERGY_PER_CALL or name.endswith(PER_JOULE_SUFFIX)
            or name in {f"energy_per_{unit}" for unit in PER_CALL_NAMES.values()})


def process_values(m: Measurement, figure: Figure | None = None) -> np.ndarray:
    """Figure `figure` (default: the headline) of `m` as each of its processes measured
    it, in the direction the figure says is better (see the module docstring); one value
    for a figure that does not follow the time per call; empty when it is not finite."""
    figure = figure if figure is not None else m.primary
    if figure is None or not math.isfinite(figure.value):
        return np.empty(0)
    bases = _process_bases(m, figure.name)
    if not bases or not follows_time(m, figure.name):
        return np.asarray([figure.value], dtype=float)
    center = geometric_mean(bases)
    scale = np.asarray(bases, dtype=float) / center
    values = figure.value / scale if figure.higher_is_better else figure.value * scale
    return np.asarray(values, dtype=float)


def _positive_values(values: np.ndarray) -> np.ndarray:
    """The finite positive ones: a ratio of speeds means nothing for the others (a
    damaged or hand-made record can hold them)."""
    return np.asarray(values[np.isfinite(values) & (values > 0)], dtype=float)


def _process_bases(m: Measurement, name: str) -> list[float]:
    """Each process's time per call on the base of figure `name`: the mean of its samples
    for a rate over the mean, else their median; processes with no positive sample are
    left out."""
    over_mean = any(r.name == name and r.over == "mean" for r in m.rates)
    out = []
    for timing in m.timings:
        positive = [t for t in timing.samples if t > 0]
        if positive:
            out.append(float(np.mean(positive) if over_mean else np.median(positive)))
    return out


def speed_ratio(ratio: float, higher_is_better: bool) -> float:
    """A ratio of headline figures turned into "how many times faster" (> 1 is faster)."""
    return ratio if higher_is_better else 1.0 / ratio


@dataclass
class CaseResults:
    """Everything one selection of runs holds about one case (same key).

    `figure_pattern` None takes the headline figure of each measurement; a glob the first
    figure whose name matches it, of the measurements that have one."""

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
        """The measured ones whose figure is taken: all of them for the headline, those
        that have a matching figure otherwise."""
        if self.figure_pattern is None:
            return self.ok
        return [(r, m) for r, m in self.ok if self._figure_of(m) is not None]

    @property
    def figure(self) -> Figure | None:
        pooled = self.pooled
        return self._figure_of(pooled[-1][1]) if pooled else None

    @cached_property
    def run_figures(self) -> list[Figure]:
        """The figure of each measurement taken, oldest first, where it is finite."""
        out = []
        for _, m in self.pooled:
            figure = self._figure_of(m)
            if figure is not None and math.isfinite(figure.value) and figure.value > 0:
                out.append(figure)
        return out

    @cached_property
    def per_run(self) -> list[np.ndarray]:
        """The process values of each measurement taken (one array per run)."""
        parts = [_positive_values(process_values(m, self._figure_of(m)))
                 for _, m in self.pooled]
        return [p for p in parts if p.size]

    @property
    def host_speed_sd(self) -> float:
        """The floor under one run's process spread (`Measurement.host_speed_sd`): the
        largest of the runs taken."""
        return max((m.host_speed_sd for _, m in self.pooled), default=0.0)

    @cached_property
    def values(self) -> np.ndarray:
        """Every process value of every run taken."""
        return np.concatenate(self.per_run) if self.per_run else np.empty(0)

    @property
    def processes(self) -> int:
        return int(self.values.size)

    @property
    def median(self) -> float:
        """The figure this selection shows: the run's own with one run, else the median
        of the runs' figures."""
        figures = self.run_figures
        if not figures:
            return math.nan
        if len(figures) == 1:
            return figures[0].value
        return float(np.median([f.value for f in figures]))

    def stated_ci(self, confidence: float = 0.95) -> tuple[float, float] | None:
        """`median_ci`, or None where the one run's figure states no interval: what the
        JSON of `show`, `history` and `compare` says alike."""
        figures = self.run_figures
        if len(figures) == 1 and not states_interval(figures[0]):
            return None
        return self.median_ci(confidence)

    def median_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """The interval of the figure this selection shows: with one run the run's own,
        as `accelbench show` prints it; over several runs, where a repeat of as many runs
        is expected (`core.between`), over the runs' figures."""
        from accelbench.core.between import between_processes

        figures = self.run_figures
        if not figures:
            return math.nan, math.nan
        if len(figures) == 1:
            _, low, high = figure_interval(figures[0])
            return low, high
        spread = between_processes([f.value for f in figures], confidence)
        return spread.low, spread.high

    @property
    def rel_half_width(self) -> float:
        """The half-width of `median_ci` relative to the figure, as printed "±x%": with one
        run and the headline figure, exactly what `accelbench show` prints for it (the
        interval of the time per call)."""
        if len(self.run_figures) == 1 and self.figure_pattern is None:
            spread = self.pooled[-1][1].spread
            if spread is not None:
                return spread.rel_half_width
        low, high = self.median_ci()
        value = self.median
        return (high - low) / 2.0 / value if value else math.nan

    @property
    def runs(self) -> list[str]:
        return list(dict.fromkeys(run_id for run_id, _ in self.pooled))

    @property
    def noisy(self) -> bool:
        return any(m.noisy for _, m in self.pooled)

    @property
    def contended(self) -> bool:
        """Some of the figures taken were measured while the host was busy."""
        return any(m.contended for _, m in self.pooled)

    @property
    def throttled(self) -> bool:
        """Some of the figures taken were measured while the device throttled."""
        return any(m.throttled for _, m in self.pooled)

    @property
    def unsettled(self) -> bool:
        """Some process's samples still stepped or drifted after its warm-up."""
        return any(not t.settled for _, m in self.pooled for t in m.timings)

    @property
    def figure_names(self) -> list[str]:
        """The names of the figures of the newest measurement, to say what there is."""
        return [f.name for f in self.ok[-1][1].figures] if self.ok else []

    @property
    def reasons(self) -> list[str]:
        return [f"{m.status}: {m.reason or '-'}" for _, m in self.not_ok]


def collect(runs: Iterable[StoredRun], figure: str | None = None) -> dict[str, CaseResults]:
    """Per case key, the measurements of `runs` (oldest run first), pooling the figure
    `figure` (a glob on figure names) or, when None, the headline figure.

    When the runs measured a case with different benchmark versions, only the newest
    version is kept (the others are named in `dropped_versions`): samples of different
    code are never taken together.
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

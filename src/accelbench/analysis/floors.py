"""The run-to-run noise of each case, learned from the repeated runs a store holds.

One run's processes cannot see what changes between runs (the host's state when it
started, where its memory landed, the order its cases ran in). Where the store holds
repeated runs of a case on one stack and host, the spread of their figures is that noise
(`evidence.noise_floor`, from successive differences in time order, so that a real step
in the series moves one difference and not the estimate), and a comparison takes it as a
floor under each side's variance.

Figures measured while the host was contended or the device throttled are left out: their
spread is not the case's own.

A stack with no repeated runs of its own (a new build, measured once) takes the floor
its case has on the other stacks of the same host: how much a case moves from run to run
is the host's and the case's more than the stack's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from accelbench.analysis.evidence import NoiseFloor, noise_floor
from accelbench.analysis.values import CaseResults, matching_figure
from accelbench.core.measurement import Figure, Measurement
from accelbench.store import RunRecord

# (case key, benchmark version, host, generation key)
FloorKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class Floors:
    """The noise floor of each case on each stack and host."""

    floors: Mapping[FloorKey, NoiseFloor]

    def for_case(self, entry: CaseResults,
                 where: Mapping[str, tuple[str, str]]) -> NoiseFloor | None:
        """The largest floor over the hosts and stacks of `entry`'s runs (`where`: run id
        to its host and generation key), or None where the store taught none; a run
        whose stack has no floor takes the largest of its host's other stacks."""
        known = [f for f in (self._floor(entry, *where[run]) for run in entry.runs
                             if run in where) if f is not None]
        return max(known, key=lambda f: f.rel_sd) if known else None

    def _floor(self, entry: CaseResults, host: str, stack: str) -> NoiseFloor | None:
        own = self.floors.get((entry.key, entry.version, host, stack))
        if own is not None:
            return own
        others = [f for (key, version, on, _), f in self.floors.items()
                  if (key, version, on) == (entry.key, entry.version, host)]
        return max(others, key=lambda f: f.rel_sd) if others else None


def learn(pairs: Iterable[tuple[RunRecord, Measurement]], figure: str | None = None) -> Floors:
    """The floors from every stored measurement of some cases, with its run's record:
    the headline figure, or the first figure matching the glob `figure`."""
    series: dict[FloorKey, list[tuple[float, str, float]]] = {}
    for record, m in pairs:
        if not m.ok or m.contended or m.throttled:
            continue
        found = _figure(m, figure)
        if found is None:
            continue
        key = (m.case.key, m.case.version, record.host, record.generation_key)
        series.setdefault(key, []).append((record.started_at, record.id, found.value))
    floors = {}
    for key, points in series.items():
        learned = noise_floor([value for _, _, value in sorted(points)])
        if learned is not None:
            floors[key] = learned
    return Floors(floors)


def _figure(m: Measurement, pattern: str | None) -> Figure | None:
    return m.primary if pattern is None else matching_figure(m, pattern)

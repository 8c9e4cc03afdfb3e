"""Did the host itself run faster or slower between two selections of runs?

Every worker process times the host's reference work (`env.host.reference`) just before
and just after each case. A process's reading is the geometric mean of the two, as a
speed (1 / seconds), and a side's readings are those of every process of every CPU case
of its runs: dozens for a quick-suite run, so a shift of a few percent is seen. The test
is the one `compare` uses for the cases (`evidence`, Welch's t on the logarithms).

What `compare` makes of a shift: the figures of CPU cases follow the host's speed, so a
case that moved the way the host did, by no more than the host did plus the minimum
effect, is inconclusive, saying how much the host moved; a case that moved against the
host, or well beyond it, keeps its verdict. Cases on GPUs are left alone: their kernels
do not run on the host's cores.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from accelbench.analysis import evidence as ev
from accelbench.core.measurement import Measurement
from accelbench.env.host.reference import speed_of
from accelbench.store import StoredRun

CPU = "cpu"


@dataclass(frozen=True)
class HostShift:
    """B's host speed over A's on the reference work (> 1: B's host ran it faster)."""

    ratio: float
    low: float
    high: float
    significant: bool
    readings: tuple[int, int]  # on A, on B
    reference: str

    def moved(self, min_effect: float) -> bool:
        """Significantly, and by at least half the minimum effect either way."""
        return self.significant and abs(math.log(self.ratio)) >= math.log1p(min_effect / 2)

    def describe(self) -> str:
        return (f"the host ran its reference work {self.ratio - 1:+.1%} in B "
                f"({self.ratio:.3f} [{self.low:.3f}, {self.high:.3f}] over "
                f"{self.readings[0]} and {self.readings[1]} processes)")

    def to_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "ci": [self.low, self.high],
                "significant": self.significant, "readings": list(self.readings),
                "reference": self.reference}


def readings(m: Measurement) -> list[tuple[str, float]]:
    """(what the reference is, its speed) for each process of `m` that timed it."""
    return [found for found in map(speed_of, m.hosts) if found is not None]


def host_shift(a: Iterable[StoredRun], b: Iterable[StoredRun], alpha: float = 0.05
               ) -> HostShift | None:
    """How B's host speed compares with A's, from the readings beside their CPU cases;
    None when a side has fewer than two, or the two sides timed different reference
    work (another Python or hash library)."""
    side_a, side_b = _side(a), _side(b)
    if side_a is None or side_b is None or side_a[0] != side_b[0]:
        return None
    reference, speeds_a = side_a
    speeds_b = side_b[1]
    found = ev.weigh(ev.side([speeds_a]), ev.side([speeds_b]), alpha)
    return HostShift(found.ratio, found.low, found.high, found.significant,
                     (len(speeds_a), len(speeds_b)), reference)


def _side(runs: Iterable[StoredRun]) -> tuple[str, list[float]] | None:
    found: dict[str, list[float]] = {}
    for run in runs:
        for m in run.measurements:
            if m.ok and m.case.device == CPU:
                for name, speed in readings(m):
                    found.setdefault(name, []).append(speed)
    if len(found) != 1:
        return None  # none, or references of different kinds mixed in one side
    ((name, speeds),) = found.items()
    return (name, speeds) if len(speeds) >= 2 else None

"""Noise between worker processes: the interval a figure is stated with.

Variation between processes dominates variation within one (pyperf's lesson): a fresh
process lands on other pages, caches, clocks and neighbours, so the samples of a single
process say little about what the next run will see. When a case was measured in several
processes, each process's value is the median of its samples, the case's figure is the
geometric mean of those values, and its interval is where a repeat run's figure is
expected to fall: a Student-t prediction interval for the mean of that many process
values, on the log scale (noise on times is multiplicative):

    exp(mean(log v) ± t(1 - α/2, n - 1) · sd(log v) · sqrt(2 / n))

(the difference of two independent means of n values each has variance 2σ²/n). The
figure is the centre of its interval, and the same estimate `compare` tests. (Until
accelbench 0.1 it was the median of the process values: with three processes that moves
between runs by about a third more, the process effects being near normal, not
heavy-tailed, on the machines measured.) With a single process only the order-statistic
confidence interval of that process's median exists (core.stats), and the record says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

METHOD_WITHIN = "within one process: order-statistic CI of the median"
METHOD_BETWEEN = "between processes: repeat-run interval (Student t on log process medians)"


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean(log v)) of positive values."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class Spread:
    """The central per-call time of a case and its stated interval."""

    center: float
    low: float
    high: float
    processes: int
    method: str

    @property
    def rel_half_width(self) -> float:
        if not self.center > 0:
            return math.nan
        return (self.high - self.low) / 2.0 / self.center


def between_processes(values: Sequence[float], confidence: float = 0.95) -> Spread:
    """`values`: one positive value per process (its median time per call)."""
    from scipy.stats import t as student_t

    v = [float(x) for x in values]
    n = len(v)
    if n < 2:
        raise ValueError("an interval between processes needs at least two processes")
    if min(v) <= 0:  # no logarithm: the median, between the extremes
        return Spread(_median(v), min(v), max(v), n, METHOD_BETWEEN)
    logs = [math.log(x) for x in v]
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = float(student_t.ppf(1.0 - (1.0 - confidence) / 2.0, n - 1)) * sd * math.sqrt(2.0 / n)
    center = math.exp(mean)
    return Spread(center, min(math.exp(mean - half), center),
                  max(math.exp(mean + half), center), n, METHOD_BETWEEN)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0

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

Three processes can agree by chance: sd(log v) from two degrees of freedom falls below a
third of the true one about one time in eleven. A CPU case's processes share the host's
cores, and the host's own speed, timed beside every process of the run on the same fixed
work (`env.host.reference`), moved between them by a share that dozens of readings state
well. That share is a floor under sd(log v): a process of the case cannot vary less than
the cores it ran on. The case's own degrees of freedom are kept (the floor bounds its
noise from below; it does not measure it). On a 2-core VM the floor was 0.7-2%; over two
sets of four quick-suite runs it took the share of other runs' figures inside a run's
interval from 85% to 89% in one and left it at 87% in the other. The processes of the
compute-bound cases there ran slower as the host's reference did (median correlations of
-0.69 and -0.42 over two sets).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

METHOD_WITHIN = "within one process: order-statistic CI of the median"
METHOD_BETWEEN = "between processes: repeat-run interval (Student t on log process medians)"
FLOORED = "; sd floored at the host's speed spread"


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


def between_processes(values: Sequence[float], confidence: float = 0.95,
                      floor: float = 0.0, method: str = METHOD_BETWEEN) -> Spread:
    """`values`: one positive value per process (its median time per call); `floor`: an
    sd of log values the processes vary by at least (the host's, see above)."""
    from scipy.special import stdtrit  # scipy.stats.t.ppf, without scipy.stats' import

    v = [float(x) for x in values]
    n = len(v)
    if n < 2:
        raise ValueError("an interval between processes needs at least two processes")
    if min(v) <= 0:  # no logarithm: the median, between the extremes
        return Spread(_median(v), min(v), max(v), n, method)
    logs = [math.log(x) for x in v]
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    if floor > sd:
        sd, method = floor, method + FLOORED
    half = float(stdtrit(n - 1, 1.0 - (1.0 - confidence) / 2.0)) * sd * math.sqrt(2.0 / n)
    center = math.exp(mean)
    return Spread(center, min(math.exp(mean - half), center),
                  max(math.exp(mean + half), center), n, method)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0

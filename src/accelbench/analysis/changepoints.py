"""Step detection: where a noisy, piecewise-constant series changes level.

PELT (Killick, Fearnhead and Eckley 2012: optimal partitioning with pruning) with a robust
cost: a segment costs the sum of absolute deviations from its median, in units of the
noise. The noise is estimated robustly from the series itself, as the median absolute
difference between neighbours (a step moves one difference only), scaled to a standard
deviation. Each change point costs `penalty_factor * log(n)` in those units, so a step
is kept only when it explains more than the noise could; one outlying point is not a
step, and nothing is compared with a fixed threshold against the previous point.

The same noise says how many points a side a step needs before the detection can see it
(`points_needed`): a series too short or too noisy for a step of the minimum effect
cannot say there was none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from accelbench.core.stats import Samples

DEFAULT_PENALTY_FACTOR = 3.0
DEFAULT_MIN_SIZE = 2
# Below this relative noise, steps are judged as if the noise were this large: timings are
# never more exact than that, and a perfectly flat series must not make every wiggle a step.
NOISE_FLOOR = 1e-3
# A step is seen about 4 times in 5 when its expected gain clears this many times the
# penalty (simulated in tests/analysis/test_changepoints.py); at 1x, about half the time.
POWER_MARGIN = 1.5
_MAX_POINTS = 10**6


def noise_sigma(values: Samples) -> float:
    """Robust standard deviation of the noise: 1.4826 * MAD of first differences / sqrt 2."""
    y = np.asarray(values, dtype=float)
    if y.size < 2:
        return 0.0
    return float(1.4826 * np.median(np.abs(np.diff(y))) / math.sqrt(2.0))


def relative_noise(values: Samples) -> float:
    """The noise `detect` weighs steps against: `noise_sigma` of the series over its
    median, at least NOISE_FLOOR; NaN for fewer than 2 finite points."""
    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.all(np.isfinite(x)):
        return math.nan
    scale = float(np.median(np.abs(x))) or 1.0
    return max(noise_sigma(x / scale), NOISE_FLOOR)


def points_needed(
    rel_noise: float,
    effect: float,
    *,
    n: int = 0,
    penalty_factor: float = DEFAULT_PENALTY_FACTOR,
    min_size: int = DEFAULT_MIN_SIZE,
) -> int | None:
    """Points a side of a step of relative size `effect` that `detect` needs to see it
    about 4 times in 5, at relative noise `rel_noise`, in a series of at least `n`
    points; None when no count would (no effect, no finite noise).

    Splitting m + m points at a step of size d lowers the robust cost by about
    2 m h(d / 2σ) in noise units, h(μ) = E|μ + Z| - E|Z| for a standard normal Z; the
    step is kept when that beats the penalty for one change, penalty_factor ln(n).
    """
    if not (effect > 0 and rel_noise > 0 and math.isfinite(rel_noise)):
        return None
    mu = effect / (2.0 * max(rel_noise, NOISE_FLOOR))
    density = math.exp(-mu * mu / 2.0) / math.sqrt(2.0 * math.pi)
    gain = mu * math.erf(mu / math.sqrt(2.0)) + 2.0 * density - 2.0 / math.sqrt(2.0 * math.pi)
    if not gain > 0:
        return None
    m = min_size
    while True:  # the penalty grows with the series: settle m (it only increases)
        wanted = POWER_MARGIN * penalty_factor * math.log(max(n, 2 * m)) / (2.0 * gain)
        nxt = max(min_size, math.ceil(wanted))
        if nxt > _MAX_POINTS:
            return None
        if nxt <= m:
            return m
        m = nxt


def detect(
    values: Samples,
    *,
    penalty_factor: float = DEFAULT_PENALTY_FACTOR,
    min_size: int = DEFAULT_MIN_SIZE,
) -> list[int]:
    """Indices where a new level starts, ascending (index i: the step is between i-1 and i).

    Segments are at least `min_size` points long.
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2 * min_size or not np.all(np.isfinite(x)):
        return []
    y = x / (float(np.median(np.abs(x))) or 1.0)
    sigma = relative_noise(x)
    penalty = penalty_factor * math.log(n)

    def cost(s: int, t: int) -> float:
        segment = y[s:t]
        return float(np.abs(segment - np.median(segment)).sum()) / sigma

    best = np.full(n + 1, math.inf)
    best[0] = -penalty
    previous = np.zeros(n + 1, dtype=int)
    candidates = [0]
    for t in range(min_size, n + 1):
        ready = [s for s in candidates if t - s >= min_size and math.isfinite(best[s])]
        totals = [best[s] + cost(s, t) for s in ready]
        i = int(np.argmin([total + penalty for total in totals]))
        best[t] = totals[i] + penalty
        previous[t] = ready[i]
        # Pruning: a start that cannot beat the best even before paying for a new change
        # never will later (the cost is additive over splits).
        kept = {s for s, total in zip(ready, totals, strict=True) if total <= best[t]}
        candidates = [s for s in candidates if s in kept or s not in ready] + [t]
    points = []
    t = n
    while t > 0:
        s = int(previous[t])
        if s > 0:
            points.append(s)
        t = s
    return sorted(points)


def segments(n: int, points: Sequence[int]) -> list[tuple[int, int]]:
    """[start, end) of each segment between the change points."""
    return list(pairwise([0, *points, n]))

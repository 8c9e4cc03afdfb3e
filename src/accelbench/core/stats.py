"""Statistics of timing samples: robust summaries and a distribution-free CI of the median.

The confidence interval of the median comes from order statistics (the binomial
argument), so it needs no assumption about the shape of the noise. Tests check every
figure here against numpy and scipy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

# Samples as callers hold them: a list or tuple of floats, or a numpy array of them.
Samples: TypeAlias = Sequence[float] | npt.NDArray[np.floating]


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    ci_low: float
    ci_high: float
    confidence: float
    ci_exact: bool  # False when there were too few samples to reach `confidence`

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def cv(self) -> float:
        """Coefficient of variation (sample standard deviation over mean)."""
        return self.stdev / self.mean if self.mean else math.nan

    @property
    def rel_ci(self) -> float:
        """Half-width of the median's confidence interval, relative to the median."""
        if not self.median:
            return math.nan
        return (self.ci_high - self.ci_low) / 2.0 / self.median

    @property
    def rel_iqr(self) -> float:
        return self.iqr / self.median if self.median else math.nan


def median_ci(samples: Samples, confidence: float = 0.95) -> tuple[float, float, bool]:
    """Distribution-free confidence interval of the median.

    Returns (low, high, exact). With n samples sorted, [x(k), x(n-k+1)] covers the
    median with probability 1 - 2 * P(B <= k-1), B ~ Binomial(n, 1/2); k is the
    largest rank that keeps that coverage at or above `confidence`. With too few
    samples no k qualifies and the whole range is returned with exact=False.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n == 0:
        raise ValueError("no samples")
    k = _median_ci_rank(int(n), float(confidence))
    if k < 1:
        return float(x[0]), float(x[-1]), False
    return float(x[k - 1]), float(x[n - k]), True


@functools.lru_cache(maxsize=4096)
def _median_ci_rank(n: int, confidence: float) -> int:
    """The rank k of median_ci for n samples: it depends on n and the confidence alone,
    and reading a fleet's store asks for it once per stored measurement."""
    from scipy.stats import binom

    alpha = 1.0 - confidence
    # ppf gives the smallest j with P(B <= j) >= alpha/2, so P(B <= j-1) < alpha/2:
    # j is the rank k we want (0 when even the extremes do not reach the confidence).
    return int(binom.ppf(alpha / 2.0, n, 0.5))


def summarize(samples: Samples, confidence: float = 0.95) -> Summary:
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples")
    q1, median, q3 = np.percentile(x, [25, 50, 75])
    low, high, exact = median_ci(x, confidence)
    return Summary(
        n=int(x.size),
        median=float(median),
        mean=float(x.mean()),
        stdev=float(x.std(ddof=1)) if x.size > 1 else 0.0,
        minimum=float(x.min()),
        maximum=float(x.max()),
        q1=float(q1),
        q3=float(q3),
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        ci_exact=exact,
    )


def settling_point(samples: Samples, alpha: float = 1e-3, min_effect: float = 0.02
                   ) -> int | None:
    """How many leading samples come before the series settled, or None if it did not
    visibly change: a step or a trend in the samples means the warm-up ended too early.

    A step: the split that best separates earlier from later samples (Mann-Whitney U,
    each side at least a few samples) when it is significant at `alpha` and moves the
    median by `min_effect` or more; the samples before it are the unsettled ones. A trend
    without a clear step (a slow drift): Spearman's rank correlation with the sample's
    position, significant at `alpha`, whose fitted drift over the series is at least
    `min_effect`; the first half is then unsettled. Both tests are distribution-free,
    so timing noise of any shape does not look like a change."""
    from scipy.stats import mannwhitneyu, spearmanr

    x = np.asarray(samples, dtype=float)
    n = int(x.size)
    edge = max(4, n // 8)
    if n < 2 * edge or not np.all(np.isfinite(x)) or not float(np.median(x)) > 0:
        return None
    best: tuple[float, int] | None = None
    for k in range(edge, n - edge + 1):
        left, right = x[:k], x[k:]
        if not float(np.median(right)) > 0:
            continue
        effect = abs(float(np.median(left)) / float(np.median(right)) - 1.0)
        if effect < min_effect:
            continue
        p = float(mannwhitneyu(left, right, alternative="two-sided").pvalue)
        if best is None or p < best[0]:
            best = (p, k)
    # Every split was tried: ask for `alpha` over all of them (Bonferroni).
    if best is not None and best[0] * (n - 2 * edge + 1) < alpha:
        return best[1]
    rho, p = spearmanr(np.arange(n), x)
    if np.isfinite(p) and float(p) < alpha:
        slope = float(np.polyfit(np.arange(n), x, 1)[0])
        if abs(slope) * n / float(np.median(x)) >= min_effect and np.isfinite(rho):
            return n // 2
    return None


# A value this many robust standard deviations from the median is an outlier.
OUTLIER_Z = 5.0


def robust_z(values: Sequence[float]) -> list[float]:
    """How many robust standard deviations (1.4826 MAD, at least 0.1% of the median) each
    value lies from the median, signed."""
    x = np.asarray(values, dtype=float)
    median = float(np.median(x))
    mad = float(np.median(np.abs(x - median)))
    scale = max(1.4826 * mad, 1e-3 * abs(median), 1e-300)
    return [float(v) for v in (x - median) / scale]


def robust_center(values: Sequence[float]) -> tuple[float, float, list[bool]]:
    """(median of the inliers, their robust standard deviation, which values are outliers).

    An outlier lies more than OUTLIER_Z robust standard deviations from the median
    (`robust_z`): the rule of fleet baselines and of `isolate`."""
    x = np.asarray(values, dtype=float)
    out = [abs(z) > OUTLIER_Z for z in robust_z(values)]
    inliers = x[~np.asarray(out)] if not all(out) else x
    center = float(np.median(inliers))
    spread = float(1.4826 * np.median(np.abs(inliers - center))) if inliers.size > 1 else 0.0
    return center, spread, out

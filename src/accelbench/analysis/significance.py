"""Is B different from A, by how much, and how sure are we.

- Difference: a two-sided Mann-Whitney U test on the raw samples (scipy), when the
  sample counts can reach the significance level at all; with fewer samples, the
  distribution-free confidence intervals of the two medians (order statistics) must not
  overlap. Called significant only together with a minimum effect, by the caller.
- Ratio of medians with a confidence interval: a percentile bootstrap (scipy, 2,000
  resamples, fixed seed so a report is reproducible) when both sides have at least
  MIN_BOOTSTRAP samples; with fewer, the conservative interval that combines the two
  medians' order-statistic intervals: [low_B / high_A, high_B / low_A].
- Geometric mean of ratios: scipy's gmean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelbench.core.stats import Samples, median_ci

MIN_BOOTSTRAP = 5
N_RESAMPLES = 2000
SEED = 0


@dataclass(frozen=True)
class RatioEstimate:
    """median(b) / median(a), with its confidence interval."""

    ratio: float
    low: float
    high: float
    method: str  # "bootstrap" or "order statistics"

    @property
    def rel_half_width(self) -> float:
        if not self.ratio or math.isnan(self.ratio):
            return math.nan
        return (self.high - self.low) / 2.0 / self.ratio

    def inverted(self) -> RatioEstimate:
        """1 / the ratio, its interval turned round (an unbounded end becomes 0, and 0
        an unbounded one)."""
        return RatioEstimate(_inverse(self.ratio), _inverse(self.high), _inverse(self.low),
                             self.method)


def _inverse(value: float) -> float:
    return math.inf if value == 0 else 1.0 / value


@dataclass(frozen=True)
class Difference:
    p_value: float | None  # None when the interval test was used
    test: str  # "mann-whitney" or "ci-overlap"
    significant: bool


def _ratio_statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    ratio: np.ndarray = np.median(b, axis=axis) / np.median(a, axis=axis)
    return ratio


def ratio_of_medians(
    a: Samples, b: Samples, confidence: float = 0.95,
    n_resamples: int = N_RESAMPLES, seed: int = SEED,
) -> RatioEstimate:
    from scipy.stats import bootstrap

    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("no samples")
    ratio = float(np.median(y) / np.median(x))
    if min(x.size, y.size) >= MIN_BOOTSTRAP and (np.ptp(x) > 0 or np.ptp(y) > 0):
        result = bootstrap(
            (x, y), _ratio_statistic, vectorized=True, paired=False, method="percentile",
            confidence_level=confidence, n_resamples=n_resamples,
            rng=np.random.default_rng(seed),
        )
        ci = result.confidence_interval
        return RatioEstimate(ratio, float(ci.low), float(ci.high), "bootstrap")
    a_low, a_high, _ = median_ci(x, confidence)
    b_low, b_high, _ = median_ci(y, confidence)
    return RatioEstimate(ratio, b_low / a_high, b_high / a_low, "order statistics")


def min_attainable_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney test can give for n1, n2.

    2 / C(n1 + n2, n1), through the logarithm of the binomial coefficient: with a
    thousand samples a side the coefficient itself is far beyond a float."""
    log_ways = math.lgamma(n1 + n2 + 1) - math.lgamma(n1 + 1) - math.lgamma(n2 + 1)
    return min(1.0, 2.0 * math.exp(-log_ways))


def difference(a: Samples, b: Samples, alpha: float = 0.05) -> Difference:
    from scipy.stats import mannwhitneyu

    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("no samples")
    if min_attainable_p(x.size, y.size) < alpha:
        p = float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
        return Difference(p, "mann-whitney", p < alpha)
    a_low, a_high, _ = median_ci(x, 1.0 - alpha)
    b_low, b_high, _ = median_ci(y, 1.0 - alpha)
    return Difference(None, "ci-overlap", a_high < b_low or b_high < a_low)


def geometric_mean(ratios: Sequence[float]) -> float:
    from scipy.stats import gmean

    values = [r for r in ratios if r > 0 and math.isfinite(r)]
    return float(gmean(values)) if values else math.nan

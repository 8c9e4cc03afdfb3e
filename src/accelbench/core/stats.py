"""Statistics of timing samples: robust summaries and a distribution-free CI of the median.

The confidence interval of the median comes from order statistics (the binomial
argument), so it needs no assumption about the shape of the noise. Tests check every
figure here against numpy and scipy.

Every worker process and every command that summarizes a figure runs this module, so it
takes its distribution functions from `scipy.special` and not from `scipy.stats`:
importing scipy.stats builds its hundred-odd distributions, about 0.6 s of a 2-core VM's
CPU in each process (a third of importing PyTorch), where scipy.special takes under
0.1 s. What is computed here instead (a binomial quantile, average ranks, the
Mann-Whitney U and Spearman tests) follows scipy.stats step for step, and the tests
check each against it.
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
    alpha = 1.0 - confidence
    # The smallest j with P(B <= j) >= alpha/2, so P(B <= j-1) < alpha/2: j is the rank k
    # we want (0 when even the extremes do not reach the confidence).
    return half_binomial_ppf(alpha / 2.0, n)


def half_binomial_ppf(q: float, n: int) -> int:
    """scipy.stats.binom.ppf(q, n, 0.5): the smallest j with P(B <= j) >= q for
    B ~ Binomial(n, 1/2); -1 for q <= 0 and n for q >= 1, as scipy gives."""
    from scipy.special import bdtr, ndtri

    if q <= 0.0:
        return -1
    if q >= 1.0:
        return n
    # The normal approximation's quantile, then a step or two to the exact one.
    j = min(max(int(n / 2.0 + float(ndtri(q)) * math.sqrt(n) / 2.0), 0), n)
    while j > 0 and float(bdtr(j - 1, n, 0.5)) >= q:
        j -= 1
    while j < n and float(bdtr(j, n, 0.5)) < q:
        j += 1
    return j


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
        p = mann_whitney_p(left, right)
        if best is None or p < best[0]:
            best = (p, k)
    # Every split was tried: ask for `alpha` over all of them (Bonferroni).
    if best is not None and best[0] * (n - 2 * edge + 1) < alpha:
        return best[1]
    rho, p = spearman_trend(x)
    if np.isfinite(p) and p < alpha:
        slope = float(np.polyfit(np.arange(n), x, 1)[0])
        if abs(slope) * n / float(np.median(x)) >= min_effect and np.isfinite(rho):
            return n // 2
    return None


def average_ranks(x: npt.NDArray[np.floating]) -> tuple[npt.NDArray[np.float64],
                                                        npt.NDArray[np.int64]]:
    """scipy.stats.rankdata(x, "average"), 1-based, and the size of each group of equal
    values (scipy's `return_ties`)."""
    order = np.argsort(x, kind="mergesort")
    ordered = x[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    dense = np.empty(x.size, dtype=np.int64)
    dense[order] = np.cumsum(first)
    edges = np.r_[np.nonzero(first)[0], x.size]
    return 0.5 * (edges[dense] + edges[dense - 1] + 1), np.diff(edges)


def mann_whitney_p(x: Samples, y: Samples) -> float:
    """The two-sided p-value of scipy.stats.mannwhitneyu(x, y) (method "auto"): exact
    where either sample has at most 8 values and no two values are equal, else the normal
    approximation with the tie and continuity corrections."""
    from scipy.special import ndtr

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n1, n2 = int(a.size), int(b.size)
    ranks, ties = average_ranks(np.concatenate([a, b]))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    u = max(u1, n1 * n2 - u1)
    if min(n1, n2) <= 8 and not bool((ties > 1).any()):
        counts = _u_counts(n1, n2)
        # P(U >= u) = P(U <= n1*n2 - u): the distribution is symmetric.
        p = 2.0 * sum(counts[: n1 * n2 - round(u) + 1]) / math.comb(n1 + n2, n1)
    else:
        n = n1 + n2
        tie_term = float((ties.astype(float) ** 3 - ties).sum())
        s = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))))
        with np.errstate(divide="ignore", invalid="ignore"):  # every value equal: s = 0
            z = np.float64(u - n1 * n2 / 2.0 - 0.5) / np.float64(s)
        p = 2.0 * float(ndtr(-z))
    return min(max(p, 0.0), 1.0)


@functools.lru_cache(maxsize=256)
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """How many of the C(n1+n2, n1) orderings of two samples without ties give each U:
    the coefficients of the Gaussian binomial coefficient [n1+n2, n1]_q, multiplied up
    factor by factor, (1 - q^(n+i)) / (1 - q^i), in exact integers."""
    m, n = sorted((n1, n2))
    c = [1] + [0] * (m * n + m)
    for i in range(1, m + 1):
        for j in range(i * n + i, n + i - 1, -1):  # times (1 - q^(n+i))
            c[j] -= c[j - n - i]
        for j in range(i, i * n + i + 1):  # over (1 - q^i)
            c[j] += c[j - i]
    return tuple(c[: m * n + 1])


def spearman_trend(x: Samples) -> tuple[float, float]:
    """scipy.stats.spearmanr(range(n), x): Spearman's rank correlation of the values with
    their position and its two-sided p-value (Student's t with n-2 degrees of freedom);
    (nan, nan) for fewer than three values or values all equal."""
    from scipy.special import stdtr

    v = np.asarray(x, dtype=float)
    n = int(v.size)
    if n < 3 or bool(np.all(v == v[0])):
        return math.nan, math.nan
    rho = float(np.corrcoef(np.arange(1.0, n + 1.0), average_ranks(v)[0])[0, 1])
    dof = n - 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = rho * math.sqrt(max(float(np.float64(dof) / ((rho + 1.0) * (1.0 - rho))), 0.0))
    return rho, float(2.0 * stdtr(dof, -abs(t)))


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

"""The statistics of comparisons, checked against answers known independently of scipy:
exact enumeration of the rank test's null distribution, the normal approximation worked
out by hand, order statistics counted by hand, and simulations with a known truth."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from accelbench.analysis.significance import (
    MIN_BOOTSTRAP,
    RatioEstimate,
    difference,
    geometric_mean,
    min_attainable_p,
    ratio_of_medians,
)
from accelbench.core.stats import Samples


def _draw(seed: int, center: float, n: int, noise: float = 0.01) -> np.ndarray:
    return center * (1 + noise * np.random.default_rng(seed).standard_normal(n))


def _u(a: Samples, b: Samples) -> float:
    """Mann-Whitney U of `a`: the pairs in which a's value is the larger, ties half."""
    return sum((x > y) + 0.5 * (x == y) for x in a for y in b)


def _exact_p(a: Samples, b: Samples) -> float:
    """Two-sided p of U by enumerating every way to split the pooled ranks (no ties)."""
    n1, n = len(a), len(a) + len(b)
    counts: dict[int, int] = {}
    for chosen in itertools.combinations(range(1, n + 1), n1):
        u = sum(chosen) - n1 * (n1 + 1) // 2
        counts[u] = counts.get(u, 0) + 1
    total = math.comb(n, n1)
    observed = _u(a, b)
    below = sum(c for v, c in counts.items() if v <= observed) / total
    above = sum(c for v, c in counts.items() if v >= observed) / total
    return min(1.0, 2 * min(below, above))


def _normal_p(a: Samples, b: Samples) -> float:
    """Two-sided p of U from the normal approximation, tie-corrected, with continuity."""
    n1, n2 = len(a), len(b)
    n = n1 + n2
    _, tie_sizes = np.unique(np.concatenate([a, b]), return_counts=True)
    ties = float(np.sum(tie_sizes**3 - tie_sizes))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    z = (abs(_u(a, b) - n1 * n2 / 2) - 0.5) / sigma
    return math.erfc(z / math.sqrt(2))


SMALL_SAMPLES = [
    ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]),  # apart: the smallest p there is
    ([1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0]),  # interleaved
    ([10.2, 10.4, 9.9], [10.0, 10.6, 10.8, 11.0, 10.1]),
    ([5.0, 1.0, 4.0, 2.0, 3.0], [2.5, 6.0, 7.0, 8.0, 9.0, 3.5, 10.0]),
    ([0.31, 0.29, 0.35, 0.30, 0.33, 0.28], [0.32, 0.36, 0.37, 0.34, 0.38, 0.40]),
    ([1.0, 2.0], [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]),
]


@pytest.mark.parametrize(("a", "b"), SMALL_SAMPLES)
def test_small_samples_get_the_exact_permutation_p(a, b) -> None:
    result = difference(a, b, alpha=0.05)
    assert result.test == "mann-whitney"
    assert result.p_value == pytest.approx(_exact_p(a, b), rel=1e-9)
    assert result.significant == (_exact_p(a, b) < 0.05)


def test_separated_samples_have_p_two_over_the_number_of_splits() -> None:
    # Only 2 of the C(8, 4) = 70 equally likely splits are as extreme: all low, all high.
    result = difference([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0])
    assert result.p_value == pytest.approx(2 / 70)
    assert result.significant
    interleaved = difference([1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0]).p_value
    assert interleaved is not None and interleaved > 0.5


def test_large_samples_and_ties_get_the_normal_approximation() -> None:
    a, b = _draw(1, 100.0, 30), _draw(2, 101.0, 25)
    assert difference(a, b).p_value == pytest.approx(_normal_p(a, b), rel=1e-9)
    # Timings quantised to a clock tick: many ties, tie-corrected variance.
    rng = np.random.default_rng(3)
    tied_a, tied_b = rng.integers(10, 15, 6).astype(float), rng.integers(11, 16, 7).astype(float)
    assert len(np.unique(np.concatenate([tied_a, tied_b]))) < 13
    assert difference(tied_a, tied_b).p_value == pytest.approx(_normal_p(tied_a, tied_b),
                                                               rel=1e-9)


def test_the_rank_test_is_symmetric_and_sees_only_order() -> None:
    a, b = _draw(4, 100.0, 12), _draw(5, 100.5, 15)
    p = difference(a, b).p_value
    assert difference(b, a).p_value == pytest.approx(p, rel=1e-12)
    # Any increasing transform of both sides leaves the ranks, hence p, as they are.
    assert difference(np.log(a), np.log(b)).p_value == pytest.approx(p, rel=1e-12)
    assert difference(1e-6 * a + 3, 1e-6 * b + 3).p_value == pytest.approx(p, rel=1e-12)
    assert difference(a[::-1], b[::-1]).p_value == pytest.approx(p, rel=1e-12)


def test_false_alarms_at_the_stated_rate_and_real_shifts_found() -> None:
    rng = np.random.default_rng(6)
    trials = 400
    alarms = sum(difference(rng.normal(100, 1, 20), rng.normal(100, 1, 20)).significant
                 for _ in range(trials))
    # About 5% of comparisons of equal distributions; ±3 binomial sd is 0.017..0.083.
    assert 0.017 <= alarms / trials <= 0.083
    found = sum(difference(rng.normal(100, 1, 20), rng.normal(101.5, 1, 20)).significant
                for _ in range(100))
    assert found >= 90  # a 1.5 sd shift at 20 + 20 samples: power about 0.99


@pytest.mark.parametrize(("n1", "n2"), [(3, 3), (4, 4), (5, 7), (2, 10), (1, 30)])
def test_smallest_attainable_p_is_the_extreme_split(n1, n2) -> None:
    apart = np.arange(n1, dtype=float), 100.0 + np.arange(n2)
    assert min_attainable_p(n1, n2) == pytest.approx(min(1.0, 2 / math.comb(n1 + n2, n1)))
    assert min_attainable_p(n1, n2) == pytest.approx(_exact_p(*apart))
    # No other split of the ranks reaches it.
    rng = np.random.default_rng(n1 * 100 + n2)
    for _ in range(20):
        pooled = rng.permutation(n1 + n2).astype(float)
        assert _exact_p(pooled[:n1], pooled[n1:]) >= min_attainable_p(n1, n2) - 1e-12


def test_a_thousand_samples_a_side_are_tested_without_overflow() -> None:
    # C(2000, 1000) is about 1e600, far beyond a float: the p-value floor is 0 there.
    assert min_attainable_p(1000, 1000) == 0.0
    assert min_attainable_p(40, 40) == pytest.approx(2 / math.comb(80, 40))
    rng = np.random.default_rng(5)
    shifted = difference(rng.normal(10, 1, 1000), rng.normal(10.5, 1, 1000))
    assert shifted.test == "mann-whitney" and shifted.significant


def test_too_few_samples_fall_back_to_interval_overlap() -> None:
    # 3 + 3 samples: the smallest attainable p is 2/20 = 0.1, above alpha. With 3
    # samples no order-statistic interval reaches 95% (the widest covers 1 - 2/8 =
    # 75%), so each median's interval is its whole range: apart means different.
    assert min_attainable_p(3, 3) == pytest.approx(0.1)
    apart = difference([10.0, 10.1, 10.2], [10.25, 10.3, 12.2], alpha=0.05)
    assert apart.test == "ci-overlap" and apart.p_value is None and apart.significant
    touching = difference([10.0, 10.1, 10.2], [10.2, 10.3, 12.2], alpha=0.05)
    assert not touching.significant
    overlapping = difference([10.0, 10.5, 11.0], [10.4, 10.9, 11.2], alpha=0.05)
    assert not overlapping.significant
    assert difference([12.0, 12.1, 12.2], [10.0, 10.1, 10.2]).significant


def test_ratio_is_the_ratio_of_medians_by_hand() -> None:
    a = [3.0, 1.0, 100.0, 2.0, 4.0]  # median 3, whatever the outlier
    b = [10.0, 2.0, 6.0, 8.0, 4.0]  # median 6
    assert ratio_of_medians(a, b).ratio == pytest.approx(2.0)
    assert ratio_of_medians([1.0, 2.0, 3.0, 4.0], [5.0, 5.0]).ratio == pytest.approx(2.0)
    with pytest.raises(ValueError):
        ratio_of_medians([], [1.0])


def test_few_samples_combine_order_statistic_intervals_counted_by_hand() -> None:
    # 4 samples: no interval reaches 95% (the widest covers 1 - 2/16), so the range.
    # 10 samples: [x(2), x(9)] covers 1 - 2 * P(B <= 1) = 1 - 2 * 11/1024 = 97.9%,
    # [x(3), x(8)] only 1 - 2 * 56/1024 = 89.1%.
    a = [10.0, 10.2, 9.9, 10.1]
    b = [float(v) for v in (7, 3, 9, 1, 5, 10, 2, 8, 4, 6)]
    assert min(len(a), len(b)) < MIN_BOOTSTRAP
    estimate = ratio_of_medians(a, b)
    assert estimate.method == "order statistics"
    assert estimate.ratio == pytest.approx(5.5 / 10.05)
    assert (estimate.low, estimate.high) == pytest.approx((2.0 / 10.2, 9.0 / 9.9))


def test_bootstrap_interval_scales_with_the_data() -> None:
    a, b = _draw(7, 100.0, 20), _draw(8, 90.0, 24)
    estimate = ratio_of_medians(a, b)
    assert estimate.method == "bootstrap"
    assert estimate.low < estimate.ratio < estimate.high
    assert estimate.low < 0.9 < estimate.high
    # The same resamples (fixed seed) of scaled data: an interval scaled alike.
    doubled = ratio_of_medians(a, 2 * b)
    assert (doubled.low, doubled.high) == pytest.approx((2 * estimate.low, 2 * estimate.high),
                                                        rel=1e-12)
    assert ratio_of_medians(a, b) == estimate  # reproducible, as reports need
    narrower = ratio_of_medians(a, b, confidence=0.5)
    assert estimate.low < narrower.low < narrower.high < estimate.high


def test_bootstrap_interval_covers_a_known_ratio_as_often_as_it_says() -> None:
    rng = np.random.default_rng(11)
    trials = 100
    covered95 = covered50 = 0
    widths = []
    for _ in range(trials):
        a = 100 * (1 + 0.02 * rng.standard_normal(25))
        b = 120 * (1 + 0.02 * rng.standard_normal(25))
        wide = ratio_of_medians(a, b, n_resamples=1000)
        covered95 += wide.low <= 1.2 <= wide.high
        widths.append(wide.rel_half_width)
        half = ratio_of_medians(a, b, confidence=0.5, n_resamples=1000)
        covered50 += half.low <= 1.2 <= half.high
    assert covered95 / trials >= 0.88
    assert 0.35 <= covered50 / trials <= 0.65
    # The median of 25 normal samples has sd about 1.25 * 0.02 / 5 = 0.5%; the ratio of
    # two, sqrt(2) times that: a 95% half-width near 1.96 * 0.71% = 1.4%.
    assert 0.007 < float(np.median(widths)) < 0.028


def test_inverted_ratio_swaps_the_interval() -> None:
    estimate = RatioEstimate(2.0, 1.0, 4.0, "bootstrap")
    assert estimate.rel_half_width == pytest.approx(0.75)
    assert estimate.inverted() == RatioEstimate(0.5, 0.25, 1.0, "bootstrap")
    measured = ratio_of_medians(_draw(9, 100.0, 20), _draw(10, 80.0, 20))
    inverted = measured.inverted()
    assert inverted.low < inverted.ratio < inverted.high
    assert inverted.ratio == pytest.approx(1 / measured.ratio)


def test_geometric_mean_by_hand() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([0.5, 2.0]) == pytest.approx(1.0)
    assert geometric_mean([1.1] * 5) == pytest.approx(1.1)
    assert geometric_mean([1.0, 10.0, 100.0]) == pytest.approx(10.0)
    # Ratios that cannot be averaged on a log scale are left out.
    assert geometric_mean([4.0, 0.0, -1.0, math.inf, math.nan]) == pytest.approx(4.0)
    assert math.isnan(geometric_mean([]))
    assert math.isnan(geometric_mean([0.0]))

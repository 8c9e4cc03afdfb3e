"""The statistics of comparisons, checked against scipy directly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from accelbench.analysis.significance import (
    MIN_BOOTSTRAP,
    N_RESAMPLES,
    SEED,
    difference,
    geometric_mean,
    min_attainable_p,
    ratio_of_medians,
)
from accelbench.core.stats import median_ci


def _draw(seed: int, center: float, n: int, noise: float = 0.01) -> np.ndarray:
    return center * (1 + noise * np.random.default_rng(seed).standard_normal(n))


def test_rank_test_is_scipys_mann_whitney_u() -> None:
    a, b = _draw(1, 100.0, 30), _draw(2, 101.0, 25)
    result = difference(a, b, alpha=0.05)
    expected = stats.mannwhitneyu(a, b, alternative="two-sided")
    assert result.test == "mann-whitney"
    assert result.p_value == pytest.approx(expected.pvalue, rel=1e-12)
    assert result.significant == (expected.pvalue < 0.05)


def test_same_distribution_is_not_significant_and_a_shift_is() -> None:
    same = difference(_draw(3, 100.0, 40), _draw(4, 100.0, 40))
    assert not same.significant
    shifted = difference(_draw(5, 100.0, 40), _draw(6, 103.0, 40))
    assert shifted.significant and shifted.p_value < 1e-6


@pytest.mark.parametrize(("n1", "n2"), [(3, 3), (4, 4), (5, 7), (2, 10)])
def test_smallest_attainable_p_is_scipys_exact_p_for_separated_samples(n1, n2) -> None:
    a, b = np.arange(n1, dtype=float), 100.0 + np.arange(n2)
    exact = stats.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
    assert min_attainable_p(n1, n2) == pytest.approx(exact)


def test_too_few_samples_fall_back_to_interval_overlap() -> None:
    # With 3 + 3 samples no rank test can reach p < 0.05 (its smallest p is 0.1).
    a, b = [10.0, 10.1, 10.2], [12.0, 12.1, 12.2]
    assert stats.mannwhitneyu(a, b, method="exact").pvalue > 0.05
    result = difference(a, b, alpha=0.05)
    assert result.test == "ci-overlap" and result.p_value is None and result.significant
    overlapping = difference([10.0, 10.5, 11.0], [10.4, 10.9, 11.2], alpha=0.05)
    assert not overlapping.significant


def test_ratio_ci_is_scipys_percentile_bootstrap() -> None:
    a, b = _draw(7, 100.0, 20), _draw(8, 90.0, 24)
    estimate = ratio_of_medians(a, b)
    expected = stats.bootstrap(
        (a, b), lambda x, y: np.median(y) / np.median(x), vectorized=False, paired=False,
        method="percentile", n_resamples=N_RESAMPLES, rng=np.random.default_rng(SEED),
    ).confidence_interval
    assert estimate.method == "bootstrap"
    assert estimate.ratio == pytest.approx(np.median(b) / np.median(a))
    assert estimate.low == pytest.approx(expected.low, rel=1e-9)
    assert estimate.high == pytest.approx(expected.high, rel=1e-9)
    assert estimate.low < 0.9 < estimate.high


def test_ratio_ci_with_few_samples_combines_order_statistic_intervals() -> None:
    a, b = [10.0, 10.2, 9.9, 10.1], [20.0, 20.5, 19.8]
    assert min(len(a), len(b)) < MIN_BOOTSTRAP
    estimate = ratio_of_medians(a, b)
    a_low, a_high, _ = median_ci(a)
    b_low, b_high, _ = median_ci(b)
    assert estimate.method == "order statistics"
    assert (estimate.low, estimate.high) == pytest.approx((b_low / a_high, b_high / a_low))
    assert estimate.low <= estimate.ratio <= estimate.high


def test_ratio_ci_covers_the_true_ratio_about_as_often_as_it_says() -> None:
    rng = np.random.default_rng(11)
    covered = 0
    trials = 60
    for _ in range(trials):
        a = 100 * (1 + 0.02 * rng.standard_normal(25))
        b = 120 * (1 + 0.02 * rng.standard_normal(25))
        estimate = ratio_of_medians(a, b, n_resamples=500)
        covered += estimate.low <= 1.2 <= estimate.high
    assert covered / trials >= 0.85


def test_inverted_ratio_swaps_the_interval() -> None:
    estimate = ratio_of_medians(_draw(9, 100.0, 20), _draw(10, 80.0, 20))
    inverted = estimate.inverted()
    assert inverted.ratio == pytest.approx(1 / estimate.ratio)
    assert (inverted.low, inverted.high) == pytest.approx((1 / estimate.high, 1 / estimate.low))


def test_geometric_mean_is_scipys_gmean() -> None:
    ratios = [0.9, 1.1, 1.25, 0.97]
    assert geometric_mean(ratios) == pytest.approx(stats.gmean(ratios))
    assert math.isnan(geometric_mean([]))

"""accelbench's statistics checked against numpy and scipy."""

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from scipy import stats as sps

from accelbench.core.stats import (
    average_ranks,
    half_binomial_ppf,
    mann_whitney_p,
    median_ci,
    spearman_trend,
    summarize,
)


@pytest.mark.parametrize("n", [6, 7, 10, 11, 20, 31, 64, 101, 200])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_median_ci_matches_scipy_quantile_test(n, confidence):
    x = np.random.default_rng(n).lognormal(size=n)
    low, high, exact = median_ci(x, confidence)
    ci = sps.quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(confidence)
    # scipy-stubs type the interval as a float; scipy returns a ConfidenceInterval.
    ci_low, ci_high = ci.low, ci.high  # type: ignore[attr-defined]
    if np.isnan(ci_low):
        assert not exact
    else:
        assert exact
        assert (low, high) == pytest.approx((ci_low, ci_high))


def test_too_few_samples_give_the_range_and_say_it_is_not_exact():
    low, high, exact = median_ci([3.0, 1.0, 2.0, 5.0, 4.0], 0.95)
    assert (low, high, exact) == (1.0, 5.0, False)


def test_summary_matches_numpy_and_scipy():
    x = np.random.default_rng(7).normal(10.0, 1.0, size=50)
    s = summarize(x)
    assert s.n == 50
    assert s.median == pytest.approx(np.median(x))
    assert s.mean == pytest.approx(np.mean(x))
    assert s.iqr == pytest.approx(sps.iqr(x))
    assert s.cv == pytest.approx(sps.variation(x, ddof=1))
    assert s.minimum == x.min() and s.maximum == x.max()
    assert s.ci_low <= s.median <= s.ci_high
    assert s.rel_ci == pytest.approx((s.ci_high - s.ci_low) / 2 / s.median)


def test_single_sample_summary_is_defined():
    s = summarize([0.5])
    assert s.median == 0.5 and s.stdev == 0.0 and not s.ci_exact


def test_empty_samples_are_refused():
    with pytest.raises(ValueError):
        summarize([])


# What core.stats computes with scipy.special instead of scipy.stats, against scipy.stats.

@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_the_binomial_quantile_is_scipy_s(confidence):
    q = (1.0 - confidence) / 2.0
    ns = np.arange(1, 3001)
    got = [half_binomial_ppf(q, int(n)) for n in ns]
    assert got == np.asarray(sps.binom.ppf(q, ns, 0.5)).astype(int).tolist()


def test_the_binomial_quantile_at_any_level_and_its_ends():
    rng = np.random.default_rng(3)
    for q, n in zip(rng.uniform(0, 1, 500), rng.integers(1, 20_000, 500), strict=True):
        assert half_binomial_ppf(float(q), int(n)) == int(sps.binom.ppf(q, n, 0.5)), (q, n)
    assert [half_binomial_ppf(q, 10) for q in (0.0, 1.0)] == [-1, 10]
    assert [int(sps.binom.ppf(q, 10, 0.5)) for q in (0.0, 1.0)] == [-1, 10]


def test_average_ranks_and_ties_are_scipy_s():
    rng = np.random.default_rng(5)
    for size in (1, 2, 7, 50):
        x = rng.integers(0, 6, size).astype(float)
        ranks, ties = average_ranks(x)
        assert ranks.tolist() == sps.rankdata(x).tolist()
        assert sorted(ties.tolist()) == sorted(np.unique(x, return_counts=True)[1].tolist())


@pytest.mark.parametrize("tied", [False, True])
def test_mann_whitney_is_scipy_s_exact_and_approximate(tied):
    rng = np.random.default_rng(11 + tied)
    for n1 in (1, 2, 4, 8, 9, 15):
        for n2 in (1, 3, 8, 9, 40, 120):
            x = rng.normal(0.3, 1.0, n1)
            y = rng.normal(0.0, 1.0, n2)
            if tied:
                x, y = np.round(x, 1), np.round(y, 1)
            expected = sps.mannwhitneyu(x, y, alternative="two-sided").pvalue
            assert mann_whitney_p(x, y) == pytest.approx(expected, rel=1e-9, abs=1e-15), \
                (n1, n2)


def test_mann_whitney_at_the_extremes_of_u():
    # All of one sample below the other: the smallest p-value there is, exactly 2/C(n,k).
    x, y = np.arange(5.0), np.arange(5.0, 40.0)
    assert mann_whitney_p(x, y) == pytest.approx(2 / math.comb(40, 5), rel=1e-12)
    assert mann_whitney_p(x, y) == pytest.approx(sps.mannwhitneyu(x, y).pvalue, rel=1e-9)
    # Interleaved halves: U at its centre, p clipped to 1 as scipy does.
    assert mann_whitney_p([1.0, 4.0], [2.0, 3.0]) == sps.mannwhitneyu([1.0, 4.0],
                                                                      [2.0, 3.0]).pvalue
    assert mann_whitney_p([1.0, 1.0, 1.0], [1.0, 1.0]) == 1.0


def test_spearman_trend_is_scipy_s():
    rng = np.random.default_rng(13)
    for n in (3, 4, 10, 64, 500):
        for x in (rng.normal(size=n), np.round(rng.normal(size=n) + np.arange(n) / n, 1),
                  np.arange(float(n)), -np.arange(float(n))):
            rho, p = spearman_trend(x)
            expected = sps.spearmanr(np.arange(n), x)
            assert rho == pytest.approx(expected.statistic, rel=1e-12, abs=1e-15)
            assert p == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300), n
    assert all(math.isnan(v) for v in spearman_trend([2.0, 2.0, 2.0]))
    assert all(math.isnan(v) for v in spearman_trend([1.0, 2.0]))


def test_a_measurement_and_its_summaries_import_no_scipy_stats():
    """Importing scipy.stats costs every worker process about 0.6 s: a case measured,
    its warm-up checked and its processes' interval taken need scipy.special alone."""
    code = textwrap.dedent("""
        import sys
        from accelbench.core.between import between_processes
        from accelbench.core.stats import settling_point, summarize
        from accelbench.core.timing import PerfCounterClock, TimingPolicy, measure
        timing = measure(lambda: sum(range(100)), PerfCounterClock(),
                         TimingPolicy(max_time=0.05, warmup_time=0.01))
        summarize(timing.samples)
        settling_point([1.0] * 10 + [2.0] * 40)
        between_processes([1.0, 1.1, 0.9])
        assert "scipy.special" in sys.modules
        print(sorted(m for m in sys.modules if m.startswith("scipy.stats")))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

"""accelbench's statistics checked against numpy and scipy."""

import numpy as np
import pytest
from scipy import stats as sps

from accelbench.core.stats import median_ci, summarize


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
